# cmake -DBUILD=DIR -DPRESETS=CMakePresets.json -P cmake/CheckPackageFlags.cmake
#
# The Debian packages ship what the hidden preset `debian-flags` builds (Debian's own -O2 and hardening flags); the
# dev and release presets inherit it. packaging/build-deb.sh packages an existing build folder (CI: the one the
# README's commands made) only when its cache holds exactly those values, read here from the presets file itself,
# so the flags are written in one place.
foreach(required BUILD PRESETS)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "usage: cmake -DBUILD=DIR -DPRESETS=CMakePresets.json -P CheckPackageFlags.cmake")
  endif()
endforeach()
if(NOT EXISTS "${BUILD}/CMakeCache.txt")
  message(FATAL_ERROR "${BUILD} is not a configured build folder (no CMakeCache.txt)")
endif()

file(READ "${PRESETS}" presets)
string(JSON count LENGTH "${presets}" configurePresets)
math(EXPR last "${count} - 1")
set(wanted)
foreach(i RANGE ${last})
  string(JSON name GET "${presets}" configurePresets ${i} name)
  if(name STREQUAL "debian-flags")
    string(JSON wanted GET "${presets}" configurePresets ${i} cacheVariables)
  endif()
endforeach()
if(NOT wanted)
  message(FATAL_ERROR "${PRESETS} has no configure preset named debian-flags")
endif()

string(JSON count LENGTH "${wanted}")
math(EXPR last "${count} - 1")
set(mismatches)
foreach(i RANGE ${last})
  string(JSON variable MEMBER "${wanted}" ${i})
  string(JSON value GET "${wanted}" ${variable})
  load_cache("${BUILD}" READ_WITH_PREFIX built_ ${variable})
  if(NOT "${built_${variable}}" STREQUAL "${value}")
    string(APPEND mismatches "\n  ${variable}: \"${built_${variable}}\", the packages need \"${value}\"")
  endif()
endforeach()
if(mismatches)
  message(FATAL_ERROR "${BUILD} was not configured with the packages' flags (the debian-flags preset):${mismatches}\n"
                      "Configure it with `cmake --preset dev` or `cmake --preset release`.")
endif()
message(STATUS "${BUILD} has the packages' flags")
