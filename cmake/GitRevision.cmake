# Sets TESSERA_GIT_REVISION to the commit of HEAD. TESSERA_REVISION_OVERRIDE (a cache variable) wins when set:
# scripts/gpu_check.sh sets it from .revision (written here by scripts/gpu_prepare.sh), because the copy of the
# working tree on the GPU machine may carry a stale .git whose HEAD is not the revision that was sent. Where the
# tree has no .git, .revision is read instead. The value is taken at configure time.
set(TESSERA_REVISION_OVERRIDE "" CACHE STRING "Git revision to record instead of git's HEAD (GPU machine copies)")
if(TESSERA_REVISION_OVERRIDE)
  set(TESSERA_GIT_REVISION "${TESSERA_REVISION_OVERRIDE}")
else()
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE TESSERA_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(NOT TESSERA_GIT_REVISION AND EXISTS ${CMAKE_SOURCE_DIR}/.revision)
  file(STRINGS ${CMAKE_SOURCE_DIR}/.revision TESSERA_GIT_REVISION LIMIT_COUNT 1)
endif()
if(NOT TESSERA_GIT_REVISION)
  set(TESSERA_GIT_REVISION "unknown")
endif()
