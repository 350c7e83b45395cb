/* A model that needs a system framework an older SDK does not have. */
void *malloc(unsigned long);
void *MPSGraphCreate(void);

int AOTInductorModelContainerRun(void) { return MPSGraphCreate() == malloc(1); }
