/*
 * A read-only shared mapping of a file, for W5's floor that reads through mmap
 * (bench/w5-floor.ts --mmap): the one thing Node's file APIs cannot do and lmdb does.
 * Bench only; bench/native-mmap.ts compiles it on first use. No engine code loads it.
 *
 *   map(fd, bytes) -> ArrayBuffer over [0, bytes) of the open file fd, unmapped when collected.
 *
 * bytes must not exceed the file's size: a page past the end of the file raises SIGBUS on
 * access, so the mapping is refused rather than made.
 */
#include <errno.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* The mapping's length travels as the finalizer's hint. */
static void unmap(napi_env env, void* data, void* hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

/* Throws an Error whose code is `code` and whose message names the failed call and errno. */
static napi_value fail(napi_env env, const char* code, const char* what) {
  char message[160];
  snprintf(message, sizeof message, "%s: %s", what, strerror(errno));
  napi_throw_error(env, code, message);
  return NULL;
}

static napi_value map_file(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd = -1;
  int64_t bytes = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 2 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int64(env, argv[1], &bytes) != napi_ok ||
      fd < 0 || bytes <= 0) {
    napi_throw_type_error(env, "EINVAL", "map(fd, bytes): an open descriptor and a positive length");
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return fail(env, "EMMAP", "fstat");
  if (bytes > st.st_size) {
    napi_throw_range_error(env, "ERANGE", "map(fd, bytes): bytes past the file's end would raise SIGBUS when read");
    return NULL;
  }
  void* at = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) return fail(env, "EMMAP", "mmap");
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, at, (size_t)bytes, unmap, (void*)(uintptr_t)bytes, &buffer) != napi_ok) {
    munmap(at, (size_t)bytes);
    napi_throw_error(env, "EMMAP", "napi_create_external_arraybuffer failed");
    return NULL;
  }
  return buffer;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "map", NAPI_AUTO_LENGTH, map_file, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "map", fn) != napi_ok) return NULL;
  return exports;
}
