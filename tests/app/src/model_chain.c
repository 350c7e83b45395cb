/* A model that needs @rpath/libmid.dylib, whose own dependency is missing. */
void *malloc(unsigned long);
int mid_run(int);

int AOTInductorModelContainerRun(void) { return mid_run(malloc(1) != 0); }
