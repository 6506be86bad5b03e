#include <iostream>
#include "autograd/functions.h"
int main() { std::cout << "lina\n"; return 0; }
