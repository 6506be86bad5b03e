// The program of every link_check_<layer> (CMakeLists.txt): it does nothing,
// but it links one layer's whole archive with the layers below it, so an
// undefined reference from that layer into a higher one stops the build.
int main() { return 0; }
