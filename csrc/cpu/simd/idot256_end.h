// Closes the target region that idot256.h opened (include once, after the last kernel).
#pragma GCC pop_options
#if defined(PYGGML_IDOT_VNNI)
#pragma GCC diagnostic pop
#endif
