/* An application's main executable. What it links and exports depends on the
 * macros: WITH_OMP (calls libomp, so libomp is loaded at launch), WITH_WRAP
 * (Wrap.framework), NAPI (defines N-API-like functions a plugin looks up in the
 * flat namespace), AOTI (defines the libtorch shim and bzero the sample models
 * look up in the flat namespace). Which of the definitions are exported is the
 * linker's -exported_symbol list. */
void *malloc(unsigned long);
int omp_get_thread_num(void);
int wrap_fn(int);

#ifdef NAPI
int napi_create_function(void *env, const char *name) { return env == name; }
int napi_get_cb_info(void *env, void *info) { return env == info; }
/* Defined but not exported (-exported_symbol leaves it out): no plugin binds to it. */
int napi_module_register(void *module) { return module != 0; }
#endif

#ifdef AOTI
int aoti_torch_create_tensor_from_blob(void *data, long ndim, void **out) {
    *out = data;
    return (int)ndim;
}
void bzero(void *p, unsigned long n) {
    char *c = p;
    while (n--) *c++ = 0;
}
#endif

int main(void) {
    int rc = malloc(1) == 0;
#ifdef WITH_OMP
    rc += omp_get_thread_num();
#endif
#ifdef WITH_WRAP
    rc += wrap_fn(1);
#endif
    return rc;
}
