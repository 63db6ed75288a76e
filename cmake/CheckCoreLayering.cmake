# Script mode (cmake -P): checks that the core's stages depend one way only.
#   cmake -DCORE_DIR=…/core "-DSTAGES=io|model|…" -P CheckCoreLayering.cmake
# STAGES lists the stage folders lowest first. A file in a stage may include headers of its own stage, of lower
# stages, and the shared headers at the top of core/ (result.h, progress.h, parallel.h); every include of a core
# header names its folder ("formats/layouts.h"). Anything else fails with the file, the line and the rule broken.
cmake_minimum_required(VERSION 3.22)
if(NOT CORE_DIR OR NOT STAGES)
  message(FATAL_ERROR "CheckCoreLayering.cmake needs -DCORE_DIR=… -DSTAGES=…")
endif()
string(REPLACE "|" ";" STAGES "${STAGES}")

file(GLOB shared_headers RELATIVE ${CORE_DIR} ${CORE_DIR}/*.h)
set(problems "")
set(checked 0)
list(LENGTH STAGES stage_count)
math(EXPR last "${stage_count} - 1")
foreach(rank RANGE ${last})
  list(GET STAGES ${rank} stage)
  file(GLOB files ${CORE_DIR}/${stage}/*.h ${CORE_DIR}/${stage}/*.cpp)
  foreach(file ${files})
    math(EXPR checked "${checked} + 1")
    file(RELATIVE_PATH shown ${CORE_DIR} ${file})
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*$" "\\1" header "${line}")
      if(header MATCHES "^([a-z_]+)/[^/]+$")
        set(folder ${CMAKE_MATCH_1})
        list(FIND STAGES ${folder} folder_rank)
        if(folder_rank EQUAL -1)
          string(APPEND problems "  core/${shown}: includes \"${header}\", which is in no stage of core/\n")
        elseif(folder_rank GREATER rank)
          string(APPEND problems
                 "  core/${shown}: includes \"${header}\" — ${stage}/ may not use ${folder}/, a higher stage\n")
        elseif(NOT EXISTS ${CORE_DIR}/${header})
          string(APPEND problems "  core/${shown}: includes \"${header}\", which does not exist\n")
        endif()
      elseif(NOT header IN_LIST shared_headers)
        string(APPEND problems
               "  core/${shown}: includes \"${header}\" without its folder (write \"<stage>/${header}\")\n")
      endif()
    endforeach()
  endforeach()
endforeach()

# Shared headers at the top depend on nothing in the stages.
foreach(header ${shared_headers})
  file(STRINGS ${CORE_DIR}/${header} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*$" "\\1" included "${line}")
    if(NOT included IN_LIST shared_headers)
      string(APPEND problems "  core/${header}: a shared header includes \"${included}\" from a stage\n")
    endif()
  endforeach()
endforeach()

file(GLOB stray RELATIVE ${CORE_DIR} ${CORE_DIR}/*.cpp)
foreach(file ${stray})
  string(APPEND problems "  core/${file}: sources belong in a stage folder, not at the top of core/\n")
endforeach()

if(problems)
  message(FATAL_ERROR "core/ layering broken (stages, lowest first: ${STAGES}):\n${problems}")
endif()
message(STATUS "core/ layering holds: ${checked} files in ${stage_count} stages (${STAGES})")
