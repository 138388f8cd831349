# The kernel tables a Zephyr build compiles: each one's files from
# sdk/src/kernels/tables.mk (the list the Makefile includes, so both builds
# agree), for the tables the Kconfig options choose.

# colibri_kernel_sources(<out> <table>...): the files of the tables, each once.
function(colibri_kernel_sources out)
  set(kernels_dir ${COLIBRI_ROOT}/sdk/src/kernels)
  file(STRINGS ${kernels_dir}/tables.mk lines REGEX "^KERNEL_SOURCES_")
  set(sources)
  foreach(table ${ARGN})
    set(found)
    foreach(line ${lines})
      if(line MATCHES "^KERNEL_SOURCES_${table} *:=(.*)$")
        string(STRIP "${CMAKE_MATCH_1}" files)
        string(REPLACE " " ";" found "${files}")
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "Colibri: no kernel table '${table}' in ${kernels_dir}/tables.mk")
    endif()
    foreach(file ${found})
      list(APPEND sources ${kernels_dir}/${file})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES sources)
  set(${out} ${sources} PARENT_SCOPE)
endfunction()
