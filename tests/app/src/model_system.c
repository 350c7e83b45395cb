/* A model that needs only system libraries: libSystem, libc++ and Metal. */
typedef unsigned long size_t;
void *malloc(size_t);
void free(void *);
void *_Znwm(size_t);
void _ZdlPv(void *);
void *MTLCreateSystemDefaultDevice(void);
void *MTLCopyAllDevices(void);

int AOTInductorModelContainerRun(void) {
    void *a = _Znwm(16), *b = malloc(16);
    int rc = MTLCreateSystemDefaultDevice() == MTLCopyAllDevices();
    _ZdlPv(a);
    free(b);
    return rc;
}
