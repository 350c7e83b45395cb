// A stand-in for the .so that PyTorch's AOTInductor compiles for the Metal (MPS)
// backend: a kernel launcher that calls Metal through the Objective-C runtime,
// allocates with libc++, and calls back into libtorch's C shim (aoti_torch_*),
// which `-undefined dynamic_lookup` leaves to be found at run time. Inductor also
// links it with `-lomp`, although nothing here uses OpenMP: that is the bug.
// No #include: there is no macOS SDK on the build machine; the stubs in stubs/
// stand in for the libraries.
typedef struct objc_object* id;
typedef struct objc_selector* SEL;
extern id MTLCreateSystemDefaultDevice(void);
extern SEL sel_registerName(const char*);
extern id objc_msgSend(id, SEL, ...);
extern void* _Znwm(unsigned long);
extern void _ZdlPv(void*);
extern void* memcpy(void*, const void*, unsigned long);
extern int aoti_torch_get_data_ptr(void* tensor, void** data);
extern int aoti_torch_mps_set_arg_tensor(void* handle, unsigned index, void* tensor);

struct Launch {
  id device;
  id queue;
  float* scratch;
};

int aoti_model_run(void* input, void* output) {
  struct Launch* launch = (struct Launch*)_Znwm(sizeof(struct Launch));
  launch->device = MTLCreateSystemDefaultDevice();
  launch->queue = objc_msgSend(launch->device, sel_registerName("newCommandQueue"));
  void* data = 0;
  int status = aoti_torch_get_data_ptr(input, &data);
  if (status == 0) status = aoti_torch_mps_set_arg_tensor(launch->queue, 0, output);
  if (status == 0 && data) memcpy(&launch->scratch, &data, sizeof data);
  _ZdlPv(launch);
  return status;
}
