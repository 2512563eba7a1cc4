# Sourced by the bench/peer scripts that score perplexity with both tools:
# the settings they share, each from its environment variable or its default.
#   CTX (256): tokens per window; CHUNKS (4): windows scored; THREADS (nproc);
#   PEER: llama.cpp's binaries under LAYERSTREAM_PEER (bench/peer/llamacpp.sh);
#   MODELS: LAYERSTREAM_MODELS (bench/peer/fetch-models.sh).
CTX=${CTX:-256}
CHUNKS=${CHUNKS:-4}
THREADS=${THREADS:-$(nproc)}
PEER=${LAYERSTREAM_PEER:-$HOME/.cache/layerstream/llama.cpp}/build/bin
MODELS=${LAYERSTREAM_MODELS:-$HOME/.cache/layerstream/models}
