/* The linker witness: an image that imports a repaired model's entry point, linked
 * by ld64.lld-16 against the repaired file (an independent reader of its header,
 * load commands and exports). */
int AOTInductorModelContainerRun(void);

int witness(void) { return AOTInductorModelContainerRun(); }
