/* A model (AOTInductor-style .so) whose kernels really use OpenMP. */
void *malloc(unsigned long);
int omp_get_num_threads(void);
void __kmpc_fork_call(void *loc, int argc, void (*microtask)(int *, int *));
void __kmpc_barrier(void *loc, int gtid);

static void kernel(int *gtid, int *btid) { __kmpc_barrier(0, *gtid + *btid); }

int AOTInductorModelContainerRun(void) {
    __kmpc_fork_call(malloc(8), 0, kernel);
    return omp_get_num_threads();
}
