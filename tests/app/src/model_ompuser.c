/* A model that needs @rpath/libompuser.dylib (which needs libomp). */
void *malloc(unsigned long);
int ompuser_run(void);

int AOTInductorModelContainerRun(void) { return ompuser_run() + (malloc(1) != 0); }
