/* A plugin that looks up a function the host defines but does not export. */
void *malloc(unsigned long);
int napi_module_register(void *module);

int plugin_init(void) { return napi_module_register(malloc(8)); }
