// A stand-in for the .so that PyTorch's AOTInductor compiles for the CPU backend:
// its kernels run in parallel through the OpenMP runtime (the calls clang emits for
// `#pragma omp parallel for`: __kmpc_fork_call with an outlined body, and
// omp_get_thread_num / omp_get_num_threads inside it), and it calls back into
// libtorch's C shim (aoti_torch_*), which `-undefined dynamic_lookup` leaves to be
// found at run time.
//
// Unlike the Metal sample, this library really uses libomp, so removing it is not the
// repair: its install name, a build machine's /opt/llvm-openmp/lib/libomp.dylib, must
// become @rpath/libomp.dylib, the copy the application ships
// (`machofix edit --change`).
// No #include: there is no macOS SDK on the build machine; the stubs stand in for the
// libraries (the Metal sample's, ../aoti_metal/stubs).
typedef struct ident ident_t;
typedef void (*kmpc_micro)(int* global_tid, int* bound_tid, ...);
extern void __kmpc_fork_call(ident_t* loc, int argc, kmpc_micro microtask, ...);
extern int omp_get_thread_num(void);
extern int omp_get_num_threads(void);
extern void* _Znwm(unsigned long);
extern void _ZdlPv(void*);
extern int aoti_torch_get_data_ptr(void* tensor, void** data);
extern int aoti_torch_get_numel(void* tensor, long* numel);

struct Relu {
  float* data;
  long count;
};

// The body the compiler outlines from `#pragma omp parallel for`: each thread clamps
// its share of the tensor.
static void relu_body(int* global_tid, int* bound_tid, struct Relu* relu) {
  (void)global_tid;
  (void)bound_tid;
  long threads = omp_get_num_threads();
  long share = (relu->count + threads - 1) / threads;
  long begin = share * omp_get_thread_num();
  long end = begin + share < relu->count ? begin + share : relu->count;
  for (long i = begin; i < end; ++i)
    if (relu->data[i] < 0) relu->data[i] = 0;
}

int aoti_model_run(void* input) {
  struct Relu* relu = (struct Relu*)_Znwm(sizeof(struct Relu));
  int status = aoti_torch_get_data_ptr(input, (void**)&relu->data);
  if (status == 0) status = aoti_torch_get_numel(input, &relu->count);
  if (status == 0) __kmpc_fork_call(0, 1, (kmpc_micro)relu_body, relu);
  _ZdlPv(relu);
  return status;
}
