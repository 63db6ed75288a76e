# Warnings for our own targets only; third-party headers come in as SYSTEM includes.
function(tessera_set_warnings target)
  # -Wshadow=local is GCC's; clang (the sanitize preset) has no such narrow form, and its -Wshadow is far wider.
  # Qt 6.4 declares QSKIP(statement, ...), so every QSKIP("why") leaves the ... empty, which clang's -Wpedantic flags.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wnon-virtual-dtor
                                           $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>
                                           $<$<CXX_COMPILER_ID:Clang>:-Wno-gnu-zero-variadic-macro-arguments>)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Strict Qt defines; QT_NO_KEYWORDS because libtorch uses `slots` as an identifier.
function(tessera_qt_defines target)
  target_compile_definitions(${target} PRIVATE QT_NO_KEYWORDS QT_NO_CAST_FROM_ASCII QT_NO_CAST_TO_ASCII
                                               QT_USE_QSTRINGBUILDER QT_NO_FOREACH)
endfunction()
