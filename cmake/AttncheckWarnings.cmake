# attncheck_warnings(target): the project's warning set; errors too with ATTNCHECK_STRICT_WARNINGS=ON.
function(attncheck_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(ATTNCHECK_STRICT_WARNINGS)
    target_compile_options(${target} PRIVATE -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror)
  endif()
endfunction()
