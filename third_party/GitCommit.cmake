# Run at every build (cmake -P): writes OUTPUT, a header defining
# LINA_GIT_COMMIT as the source tree's commit (12 hex digits, or "unknown"
# outside a git checkout), and touches it only when the commit changed, so
# a new commit recompiles the one file that includes it and nothing else.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit unknown)
endif()
set(text "// Written by third_party/GitCommit.cmake at build time.\n#define LINA_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
