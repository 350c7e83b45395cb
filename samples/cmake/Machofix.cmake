# machofix for projects that package ExecuTorch models at build time.
#
#   list(APPEND CMAKE_MODULE_PATH path/to/machofix/samples/cmake)
#   include(Machofix)
#   machofix_repair_models(app_models
#     MODELS ${CMAKE_SOURCE_DIR}/models/llama.pte ${CMAKE_SOURCE_DIR}/models/vision.pte
#     OUTPUT_DIR ${CMAKE_BINARY_DIR}/models
#     ONLY "*libomp*"                # optional: remove only these (default: every unused library)
#     ALLOW_PREFIX /opt/homebrew/)   # optional: absolute install names to accept
#   add_dependencies(app app_models)  # the app's bundle step picks the models up from OUTPUT_DIR
#
# For each model, a build rule writes OUTPUT_DIR/<name> with `machofix prune -o`
# (an identical copy when nothing needs removing), then runs `machofix check` on it:
# a model that is not fit to ship fails the build. The sources are never modified.
# Rules re-run only when a model or machofix changes. machofix is found on PATH, or
# set MACHOFIX_EXECUTABLE (e.g. to the installed `bin/machofix`).

find_program(MACHOFIX_EXECUTABLE machofix DOC "the machofix executable")

function(machofix_repair_models target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT_DIR" "MODELS;ONLY;KEEP;ALLOW_PREFIX")
  if(NOT MACHOFIX_EXECUTABLE)
    message(FATAL_ERROR "machofix_repair_models: machofix not found; set MACHOFIX_EXECUTABLE")
  endif()
  if(NOT arg_OUTPUT_DIR)
    set(arg_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/models)
  endif()
  set(policy)
  foreach(glob IN LISTS arg_ONLY)
    list(APPEND policy --only ${glob})
  endforeach()
  foreach(glob IN LISTS arg_KEEP)
    list(APPEND policy --keep ${glob})
  endforeach()
  set(gate)
  foreach(prefix IN LISTS arg_ALLOW_PREFIX)
    list(APPEND gate --allow-prefix ${prefix})
  endforeach()
  set(outputs)
  foreach(model IN LISTS arg_MODELS)
    get_filename_component(name ${model} NAME)
    set(output ${arg_OUTPUT_DIR}/${name})
    add_custom_command(
      OUTPUT ${output}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${arg_OUTPUT_DIR}
      COMMAND ${MACHOFIX_EXECUTABLE} prune -q ${model} -o ${output} ${policy}
      COMMAND ${MACHOFIX_EXECUTABLE} check -q ${output} ${policy} ${gate}
      DEPENDS ${model} ${MACHOFIX_EXECUTABLE}
      COMMENT "machofix: repairing ${name}"
      VERBATIM)
    list(APPEND outputs ${output})
  endforeach()
  add_custom_target(${target} ALL DEPENDS ${outputs})
endfunction()
