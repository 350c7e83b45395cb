/* A model that needs libc++ (operator new/delete, declared from C as _Znwm/_ZdlPv)
 * and libSystem. Linked against a libc++ stub whose install name is
 * @rpath/libc++.1.dylib, as a toolchain that ships its own libc++ links it. EXTRA
 * also imports std::terminate (__ZSt9terminatev), which the sysroot's libc++ stub
 * does not export. */
typedef unsigned long size_t;
void *malloc(size_t);
void free(void *);
void *_Znwm(size_t);
void _ZdlPv(void *);
#ifdef EXTRA
void _ZSt9terminatev(void);
#endif

int AOTInductorModelContainerRun(void) {
    void *a = _Znwm(16), *b = malloc(16);
    int rc = a == b;
#ifdef EXTRA
    if (!a) _ZSt9terminatev();
#endif
    _ZdlPv(a);
    free(b);
    return rc;
}
