# The tests written as scripts (Python, shell), each a ctest test of its own:
# included by CMakeLists.txt, except in the sanitizer suite's build
# (LINA_SANITIZED_SUITE), which runs lina's C++ tests only.

# A test written in Python: tests/SCRIPT with ARGS, TIMEOUT seconds. A test
# that cannot run here prints "SKIPPED: why" and exits 0; tests/skip_status.py,
# which runs it, turns that into exit 77 (SKIP_RETURN_CODE), and any other
# non-zero exit into a failure, whatever was printed. Where there is no python3
# each only echoes "SKIPPED: python3 not found" (an echo cannot fail, so there
# the output alone says skipped).
find_program(LINA_PYTHON3 NAMES python3)
set(LINA_SKIP_STATUS ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/skip_status.py)
function(lina_python_test name script timeout)
  if(LINA_PYTHON3)
    add_test(NAME ${name} COMMAND ${LINA_SKIP_STATUS} ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/${script} ${ARGN})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
  else()
    add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: python3 not found")
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:" TIMEOUT ${timeout})
  endif()
endfunction()

# The report (scripts/report.py) and its explorer page in headless chromium,
# on four very short runs (skipped without chromium or matplotlib).
lina_python_test(report_explorer test_report.py 300
                 --lina $<TARGET_FILE:lina> --work ${CMAKE_CURRENT_BINARY_DIR}/report_test)
# The report's grouping (seeds, recall capacity, main runs only in the course
# comparison) on synthetic run jsons: no lina binary, no browser (skipped
# without matplotlib).
lina_python_test(report_lib test_report_lib.py 120 --work ${CMAKE_CURRENT_BINARY_DIR}/report_lib_test)
# scripts/torch_compare.py's summary on made-up timings (no PyTorch needed).
lina_python_test(torch_compare test_torch_compare.py 60)
# Skip accounting (tests/test_skip_accounting.py): with a failure planted
# after or before "SKIPPED:" (and a whole and a partial skip) in two planted
# tests registered as their kinds are (lina_tests' "skip accounting: the planted
# test case", tests/test_skip_planted.cpp; skip_accounting_planted, below), ctest
# must report failed, skipped, skipped; scripts/ctest_summary.py must list them so.
# The planted tests pass while nothing is planted.
lina_python_test(skip_accounting_planted test_skip_accounting.py 60 --planted)
lina_python_test(skip_accounting test_skip_accounting.py 300 --ctest ${CMAKE_CTEST_COMMAND}
                 --build ${CMAKE_CURRENT_BINARY_DIR} --work ${CMAKE_CURRENT_BINARY_DIR}/skip_accounting_test)
# LINA_REQUIRE_TORCH=1 (CI) fails every PyTorch test that would skip, on each path by
# which it can find torch missing (torch hidden by a planted package; no PyTorch needed).
lina_python_test(require_torch test_require_torch.py 120)
# Every test case with a CUDA half says SKIPPED where there is no device and
# is selected by scripts/test.sh's cuda-sim stage (tests/test_cuda_halves.py).
lina_python_test(cuda_halves test_cuda_halves.py 60)
# The comparisons with PyTorch (skipped without Debian's python3-torch, which
# scripts/setup.sh installs). They run in the release suite only: the
# sanitizer build's lina is many times slower, and the PyTorch scripts do not
# change with it, so there they report themselves skipped.
if(CMAKE_BUILD_TYPE STREQUAL "Debug" AND CMAKE_CXX_FLAGS_DEBUG MATCHES "fsanitize")
  foreach(name torch_reference torch_recall torch_lm course_interop)
    add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: the PyTorch comparisons run in the release suite")
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:")
  endforeach()
else()
  # scripts/torch_reference.py, the PyTorch yardstick: --check, a one-step run's
  # json, one-line errors for bad arguments.
  lina_python_test(torch_reference test_torch_reference.py 300)
  # scripts/torch_recall.py's recall batches and a 2-update run.
  lina_python_test(torch_recall test_torch_recall.py 120)
  # scripts/torch_lm.py's data and a 3-update run.
  lina_python_test(torch_lm test_torch_lm.py 120)
  # lina's checkpoints in the course's PyTorch model (scripts/course_model.py):
  # strict load, eval loss and one AdamW update against PyTorch.
  lina_python_test(course_interop test_course_interop.py 600
                   --lina $<TARGET_FILE:lina> --work ${CMAKE_CURRENT_BINARY_DIR}/course_interop_test)
endif()

# The layers include, and link, only the layers below them
# (tests/test_layering.py): the includes of every source file, the symbols of
# every layer's archive (nm), and a call from core/ into dispatch/ planted in
# a copy of lina_core's archive, which must fail both checks.
set(LINA_LAYER_ARCHIVES)
foreach(layer ${LINA_LAYERS})
  list(APPEND LINA_LAYER_ARCHIVES ${layer}=$<TARGET_FILE:lina_${layer}>)
endforeach()
if(TARGET lina_cuda_sim)
  list(APPEND LINA_LAYER_ARCHIVES cuda_sim=$<TARGET_FILE:lina_cuda_sim>)
endif()
set(LINA_LINK_CHECK_FLAGS "${CMAKE_EXE_LINKER_FLAGS} ${CMAKE_THREAD_LIBS_INIT}")
if(LINA_OPENMP)
  string(APPEND LINA_LINK_CHECK_FLAGS " ${OpenMP_CXX_FLAGS}")
endif()
if(LINA_PYTHON3)
  add_test(NAME layering COMMAND ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_layering.py
                                 --nm ${CMAKE_NM} --ar ${CMAKE_AR} --cxx ${CMAKE_CXX_COMPILER}
                                 "--link-flags=${LINA_LINK_CHECK_FLAGS}" ${LINA_LAYER_ARCHIVES})
  set_tests_properties(layering PROPERTIES TIMEOUT 120)
else()
  add_test(NAME layering COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: python3 not found")
  set_tests_properties(layering PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:")
endif()

# No function over 80 lines, kernels included (tests/test_function_length.py,
# universal-ctags); every repository path the sources and docs name exists
# (tests/test_comment_paths.py).
lina_python_test(function_length test_function_length.py 60)
lina_python_test(comment_paths test_comment_paths.py 60)

# The grid runner (scripts/sweep.py): names, the SLURM script, --jobs,
# skipping and resuming, bad arguments, on very short runs; then a real
# single-node SLURM (tests/test_sweep_slurm.sh), skipped where it cannot start.
if(LINA_PYTHON3)
  add_test(NAME sweep COMMAND ${LINA_SKIP_STATUS} ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_sweep.py
                              --lina $<TARGET_FILE:lina> --work ${CMAKE_CURRENT_BINARY_DIR}/sweep_test)
  add_test(NAME sweep_slurm COMMAND ${LINA_SKIP_STATUS} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_sweep_slurm.sh
                                    $<TARGET_FILE:lina> ${CMAKE_CURRENT_BINARY_DIR}/sweep_slurm_test)
  set_tests_properties(sweep sweep_slurm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# The course's queue on the CPU (scripts/cpu-course.sh): --status, its order,
# a tiny queue in a temporary run store started, paused, stopped, resumed, collected.
if(LINA_PYTHON3)
  add_test(NAME cpu_course COMMAND ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_cpu_course.py
                                   --lina $<TARGET_FILE:lina> --work ${CMAKE_CURRENT_BINARY_DIR}/cpu_course_test)
  set_tests_properties(cpu_course PROPERTIES TIMEOUT 900)
endif()
# The course's runs on a lent GPU (scripts/device-course.sh), with a stub lina,
# and the same runs on two devices side by side (scripts/compare_devices.py).
lina_python_test(device_course test_device_course.py 300 --work ${CMAKE_CURRENT_BINARY_DIR}/device_course_test)
# What a GPU call sends back (scripts/device-pack.py, scripts/device-unpack.sh):
# a run stopped half way packed in split parts within a size limit, unpacked
# into a fresh folder and resumed there to the bits of an unstopped run.
lina_python_test(device_pack test_device_pack.py 300
                 --lina $<TARGET_FILE:lina> --work ${CMAKE_CURRENT_BINARY_DIR}/device_pack_test)
# What a GPU call is given (scripts/device-bundle.sh): the CPU-only bundle,
# built for x86-64-v3 in build/bundle-cpu (one folder, reused), runs lina
# --help and a 2-update train from a copy of it alone, LD_LIBRARY_PATH its lib/.
lina_python_test(device_bundle test_device_bundle.py 600 --work ${CMAKE_CURRENT_BINARY_DIR}/device_bundle_test)
lina_python_test(compare_devices test_compare_devices.py 60 --work ${CMAKE_CURRENT_BINARY_DIR}/compare_devices_test)
# The scripts' list of presets (scripts/presets.py) is the registry's, as
# `lina presets` prints it; the scripts that list presets read it from there.
lina_python_test(presets test_presets.py 60 --lina $<TARGET_FILE:lina>)
# A change that only moves code moves no number (scripts/same_bits.py): lina
# given as before and after is the same bits; two planted differences are caught.
lina_python_test(same_bits test_same_bits.py 300
                 --lina $<TARGET_FILE:lina> --work ${CMAKE_CURRENT_BINARY_DIR}/same_bits_test)

# The index of results/ (scripts/results_index.py): results/README.md is
# what the script writes, every json listed and naming its commit; and on a
# small fake results tree, each way that can fail.
if(LINA_PYTHON3)
  add_test(NAME results_index COMMAND ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_results_index.py
                                      --work ${CMAKE_CURRENT_BINARY_DIR}/results_index_test)
  set_tests_properties(results_index PROPERTIES TIMEOUT 60)
endif()

# The debugger, on the debug preset's lina (scripts/test.sh builds it
# first): gdb's printers (scripts/gdb/lina_printers.py) during one training
# step, and the gdb session of docs/walkthrough.md as written there. Without
# gdb or that build they print "SKIPPED: why".
set(LINA_DEBUG_BINARY ${CMAKE_CURRENT_SOURCE_DIR}/build/debug/lina)
foreach(test_name gdb_printers walkthrough_gdb)
  string(REGEX REPLACE "_?gdb_?" "" what ${test_name})
  if(LINA_PYTHON3)
    add_test(NAME ${test_name} COMMAND ${LINA_SKIP_STATUS} ${LINA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_gdb.py
                                       ${what} --lina ${LINA_DEBUG_BINARY})
    set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  else()
    add_test(NAME ${test_name} COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: python3 not found")
    set_tests_properties(${test_name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:" TIMEOUT 300)
  endif()
endforeach()
