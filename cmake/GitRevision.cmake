# Sets TESSERA_GIT_REVISION to the short hash of HEAD (with "-dirty" when the tree has changes).
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE TESSERA_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT TESSERA_GIT_REVISION)
  set(TESSERA_GIT_REVISION "unknown")
endif()
