# CONFIG_COLIBRI_MATH_TOOLCHAIN_LIBM: the core's math from the toolchain's
# newlib libm, while Zephyr keeps its minimal libc (whose math.h declares
# only sqrt and sqrtf). colibri_zephyr_math.h is forced into the core's
# compilation and names the functions; the libm of this CPU's multilib is
# linked after Zephyr's libraries; colibri_zephyr_errno.c gives newlib's
# error paths the __errno() they call.

function(colibri_toolchain_libm)
  if(NOT CONFIG_MINIMAL_LIBC)
    message(FATAL_ERROR "Colibri: CONFIG_COLIBRI_MATH_TOOLCHAIN_LIBM needs CONFIG_MINIMAL_LIBC=y "
                        "(or choose CONFIG_COLIBRI_MATH_LIBC=y to take the C library's math)")
  endif()
  execute_process(
    COMMAND ${CMAKE_C_COMPILER} ${TOOLCHAIN_C_FLAGS} -print-file-name=libm.a
    OUTPUT_VARIABLE libm OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT IS_ABSOLUTE "${libm}" OR NOT EXISTS "${libm}")
    message(FATAL_ERROR "Colibri: the toolchain has no libm.a for these flags "
                        "(${TOOLCHAIN_C_FLAGS}); install newlib (Debian: libnewlib-arm-none-eabi) "
                        "or choose CONFIG_COLIBRI_MATH_LIBC=y")
  endif()
  get_filename_component(libm "${libm}" REALPATH)
  message(STATUS "Colibri: math from ${libm}")
  zephyr_library_compile_options(-fno-math-errno
    -include ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../colibri_zephyr_math.h)
  zephyr_link_libraries(${libm})
endfunction()
