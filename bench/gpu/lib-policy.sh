# Sourced by bench/gpu/prepare.sh and bench/gpu/dry-run.sh:
# which shared libraries a carried binary may take from the machine it runs on.
#   lib_class NAME -> runtime      the C/C++ runtime (glibc, libstdc++, libgcc_s)
#                     device-cuda  CUDA libraries the GPU machine provides
#                                  (cuBLAS, cuBLASLt, the driver's libcuda)
#                     carried      anything else: must be in gpu-carry/lib
lib_class() {
  case "$1" in
    linux-vdso.so.*|ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|\
    libstdc++.so.*|libgcc_s.so.*) echo runtime ;;
    libcublas.so.*|libcublasLt.so.*|libcuda.so.*|libnvidia-*.so.*) echo device-cuda ;;
    *) echo carried ;;
  esac
}
