# Replaces LIEF 0.9.0's cmake/LIEFGit.cmake when scripts/build_lief.sh builds it:
# that module asks `git describe` for the version, which an extracted source tree
# does not have. These are the facts of the pinned tag (lief-project/LIEF 0.9.0).
if(__add_lief_git)
  return()
endif()
set(__add_lief_git ON)
set(LIEF_VERSION_MAJOR 0)
set(LIEF_VERSION_MINOR 9)
set(LIEF_VERSION_PATCH 0)
set(LIEF_COMMIT_HASH a448c5e)
set(LIEF_COMMIT_COUNT 0)
set(LIEF_GIT_TAG 0.9.0)
set(LIEF_IS_TAGGED ON)
set(LIEF_GIT_BRANCH 0.9.0)
