# Warnings for our own targets only; third-party headers come in as SYSTEM includes.
function(tessera_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Strict Qt defines; QT_NO_KEYWORDS because libtorch uses `slots` as an identifier.
function(tessera_qt_defines target)
  target_compile_definitions(${target} PRIVATE QT_NO_KEYWORDS QT_NO_CAST_FROM_ASCII QT_NO_CAST_TO_ASCII
                                               QT_USE_QSTRINGBUILDER QT_NO_FOREACH)
endfunction()
