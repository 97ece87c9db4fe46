# Sets TESSERA_GIT_REVISION to the commit of HEAD. Where the tree has no .git (the GPU machine gets a copy of
# the working tree), the file .revision written by scripts/gpu_prepare.sh is read instead.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE TESSERA_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT TESSERA_GIT_REVISION AND EXISTS ${CMAKE_SOURCE_DIR}/.revision)
  file(STRINGS ${CMAKE_SOURCE_DIR}/.revision TESSERA_GIT_REVISION LIMIT_COUNT 1)
endif()
if(NOT TESSERA_GIT_REVISION)
  set(TESSERA_GIT_REVISION "unknown")
endif()
