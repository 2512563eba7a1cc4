# cmake -P script: builds the seed corpus (seeds/<name>/ files, plus small
# example models written by the CLI for the gguf target; seeds/gguf holds the
# headers of bad mixture-of-experts files: expert count 0, experts used above
# it, an expert tensor of the wrong shape, an MXFP4 expert tensor; and of bad
# gpt-oss files: no sliding window, sinks of the wrong shape, an expert bias
# missing, YaRN RoPE, an MXFP4 tensor whose bytes run past the file), then runs the fuzzer
# for SECONDS. Any crash, leak or sanitizer report fails the test.
file(MAKE_DIRECTORY ${CORPUS})
if(EXISTS ${SEEDS})
  file(GLOB seeds ${SEEDS}/*)
  file(COPY ${seeds} DESTINATION ${CORPUS})
endif()
if(FUZZER MATCHES "fuzz_gguf")
  foreach(dtype f32 f16 q8_0 q4_0 q4_1 bf16)
    if(NOT EXISTS ${CORPUS}/example-${dtype}.gguf)
      execute_process(COMMAND ${CLI} --log-level warn example-model ${CORPUS}/example-${dtype}.gguf --layers 2 --hidden 64
                              --ffn 96 --heads 4 --kv-heads 2 --vocab 512 --ctx 64 --dtype ${dtype}
                      RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "could not generate the seed model (${dtype})")
      endif()
    endif()
  endforeach()
  # Mixtures of experts: qwen3moe, Mixtral (a llama file with expert keys), and
  # gpt-oss with its experts in MXFP4.
  foreach(arch qwen3moe mixtral gpt-oss)
    set(expert_type)
    if(arch STREQUAL "gpt-oss")
      set(expert_type --expert-type mxfp4)
    endif()
    if(NOT EXISTS ${CORPUS}/example-${arch}.gguf)
      execute_process(COMMAND ${CLI} --log-level warn example-model ${CORPUS}/example-${arch}.gguf --layers 2 --hidden 64
                              --ffn 32 --heads 4 --kv-heads 2 --vocab 512 --ctx 64 --dtype q8_0 --arch ${arch}
                              --experts 4 --experts-used 2 ${expert_type}
                      RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "could not generate the seed model (${arch})")
      endif()
    endif()
  endforeach()
endif()
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -max_len=65536 -rss_limit_mb=2048
                        -print_final_stats=1 ${CORPUS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (exit ${rc})")
endif()
