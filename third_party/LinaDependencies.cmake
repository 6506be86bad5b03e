# Finds lina's dependencies, all of them Debian packages. Nothing third-party
# is copied into this repository: a missing package stops configuration with
# the apt-get line that installs it.

function(lina_require_package name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR
      "lina needs ${name}, which was not found.\n"
      "Install it with:  sudo apt-get install ${debian_package}")
  endif()
endfunction()

lina_require_package(Eigen3 libeigen3-dev 3.4 NO_MODULE)
lina_require_package(doctest doctest-dev)
lina_require_package(nlohmann_json nlohmann-json3-dev)
lina_require_package(CLI11 libcli11-dev)
find_package(OpenMP)
if(NOT OpenMP_CXX_FOUND)
  message(FATAL_ERROR "lina needs OpenMP support in the C++ compiler (g++ has it: sudo apt-get install g++)")
endif()
find_package(Threads REQUIRED)

# CUDA is detected, not required. With nvcc present (on PATH or in
# /usr/local/cuda/bin) backend_cuda/ is compiled and linked against cuBLAS.
option(LINA_CUDA "Build the CUDA backend when a CUDA toolkit is found" ON)
# The cuda-sim preset: backend_cuda/'s .cu files compiled as C++ by g++
# against lina's CUDA runtime on the CPU (cuda_sim/), no toolkit needed.
option(LINA_CUDA_SIM "Build the CUDA backend on lina's CUDA runtime on the CPU (cuda_sim/)" OFF)
set(LINA_WITH_CUDA OFF)
if(LINA_CUDA_SIM)
  find_package(Boost 1.74 QUIET COMPONENTS context)
  if(NOT Boost_FOUND)
    message(FATAL_ERROR "lina's cuda-sim needs Boost.Context, which was not found.\n"
                        "Install it with:  sudo apt-get install libboost-context-dev")
  endif()
  set(LINA_WITH_CUDA ON)
  message(STATUS "lina: CUDA backend ON, on the simulator (cuda_sim/, no GPU)")
elseif(LINA_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)   # H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(LINA_WITH_CUDA ON)
    message(STATUS "lina: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, arch ${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "lina: no CUDA toolkit found, building the CPU backend only")
  endif()
endif()
