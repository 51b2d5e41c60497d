/*
 * tether_pool_info_t and the rule of every info struct: struct_size must be at
 * least the first published size (VERSION_MISMATCH naming struct_size below it),
 * and nothing past the caller's struct_size is written - so a caller built
 * against the header before free_blocks was appended keeps working, and a
 * newer caller's extra fields are left alone.
 */
#include <stddef.h>

#include "test_support.h"

#define SENTINEL 0xAB

static size_t g_base;

/* A pool over host memory with three 4 KiB blocks allocated and the middle one freed. */
static tether_resource_t* fragmented_pool(tether_resource_t** host, void* kept[2]) {
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  tether_resource_t* pool = NULL;
  void* middle = NULL;
  o.initial_size = 1 << 20;
  REQUIRE_OK(tether_host_resource_create(host));
  REQUIRE_OK(tether_pool_resource_create(*host, &o, &pool));
  REQUIRE_OK(tether_resource_allocate(pool, 4096, 0, 0, &kept[0]));
  REQUIRE_OK(tether_resource_allocate(pool, 4096, 0, 0, &middle));
  REQUIRE_OK(tether_resource_allocate(pool, 4096, 0, 0, &kept[1]));
  REQUIRE_OK(tether_resource_deallocate(pool, middle, 4096, 0, 0));
  return pool;
}

static void release_pool(tether_resource_t* host, tether_resource_t* pool, void* kept[2]) {
  CHECK_OK(tether_resource_deallocate(pool, kept[0], 4096, 0, 0));
  CHECK_OK(tether_resource_deallocate(pool, kept[1], 4096, 0, 0));
  CHECK_OK(tether_resource_release(pool));
  CHECK_OK(tether_resource_release(host));
}

static void test_first_size_is_the_layout_before_free_blocks(void) {
  tether_pool_info_t i = TETHER_POOL_INFO_INIT;
  CHECK(TETHER_POOL_INFO_FIRST_SIZE == offsetof(tether_pool_info_t, free_blocks));
  CHECK(i.struct_size == sizeof(tether_pool_info_t) && i.free_blocks == 0);
  CHECK(sizeof(tether_pool_info_t) >= offsetof(tether_pool_info_t, free_blocks) + sizeof(uint64_t));
}

static void test_free_blocks_counts_the_holes(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  tether_pool_info_t i = TETHER_POOL_INFO_INIT;
  void* kept[2];
  pool = fragmented_pool(&host, kept);
  CHECK_OK(tether_resource_get_pool_info(pool, &i));
  CHECK(i.pool_size == 1 << 20 && i.free_bytes == (1 << 20) - 2 * 4096 && i.chunk_count == 1);
  CHECK(i.free_blocks == 2); /* the middle block and the tail */
  CHECK(i.largest_free_block == (1 << 20) - 3 * 4096);
  CHECK_OK(tether_resource_deallocate(pool, kept[0], 4096, 0, 0));
  CHECK_OK(tether_resource_deallocate(pool, kept[1], 4096, 0, 0));
  CHECK_OK(tether_resource_get_pool_info(pool, &i));
  CHECK(i.free_blocks == 1 && i.free_bytes == 1 << 20); /* coalesced into one */
  CHECK_OK(tether_resource_trim(pool));
  CHECK_OK(tether_resource_get_pool_info(pool, &i));
  CHECK(i.free_blocks == 0 && i.pool_size == 0); /* nothing held, nothing free */
  CHECK_OK(tether_resource_release(pool));
  CHECK_OK(tether_resource_release(host));
}

static void test_an_old_size_caller_gets_the_old_fields_and_nothing_past_them(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  tether_pool_info_t now = TETHER_POOL_INFO_INIT;
  /* A caller built against the first header: its struct ends before free_blocks. */
  struct {
    tether_pool_info_t info;
    unsigned char after[16];
  } old;
  const unsigned char* bytes = (const unsigned char*)&old;
  size_t k, untouched = 0;
  void* kept[2];
  pool = fragmented_pool(&host, kept);
  CHECK_OK(tether_resource_get_pool_info(pool, &now));
  memset(&old, SENTINEL, sizeof old);
  old.info.struct_size = (uint32_t)offsetof(tether_pool_info_t, free_blocks);
  CHECK_OK(tether_resource_get_pool_info(pool, &old.info));
  CHECK(old.info.struct_size == offsetof(tether_pool_info_t, free_blocks)); /* kept as the caller set it */
  CHECK(old.info.pool_size == now.pool_size && old.info.free_bytes == now.free_bytes &&
        old.info.largest_free_block == now.largest_free_block && old.info.chunk_count == now.chunk_count);
  CHECK(old.info.pool_size == 1 << 20 && old.info.chunk_count == 1);
  for (k = offsetof(tether_pool_info_t, free_blocks); k < sizeof old; ++k) untouched += bytes[k] == SENTINEL;
  CHECK(untouched == sizeof old - offsetof(tether_pool_info_t, free_blocks));
  release_pool(host, pool, kept);
}

static void test_a_newer_callers_extra_fields_are_left_alone(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  struct {
    tether_pool_info_t info;
    uint64_t future_field;
  } newer;
  void* kept[2];
  pool = fragmented_pool(&host, kept);
  memset(&newer, SENTINEL, sizeof newer);
  newer.info.struct_size = (uint32_t)sizeof newer;
  CHECK_OK(tether_resource_get_pool_info(pool, &newer.info));
  CHECK(newer.info.struct_size == sizeof newer);
  CHECK(newer.info.pool_size == 1 << 20 && newer.info.free_blocks == 2);
  CHECK(newer.future_field == 0xABABABABABABABABull);
  release_pool(host, pool, kept);
}

static void test_a_too_small_struct_size_is_refused_and_nothing_written(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  tether_pool_info_t i;
  const uint32_t sizes[] = {0, 4, 8, TETHER_POOL_INFO_FIRST_SIZE - 8, TETHER_POOL_INFO_FIRST_SIZE - 1};
  size_t k;
  void* kept[2];
  pool = fragmented_pool(&host, kept);
  for (k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    memset(&i, SENTINEL, sizeof i);
    i.struct_size = sizes[k];
    CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_resource_get_pool_info(pool, &i), "struct_size");
    CHECK(i.struct_size == sizes[k] && i.pool_size == 0xABABABABABABABABull &&
          i.free_blocks == 0xABABABABABABABABull);
  }
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_get_pool_info(pool, NULL), "out");
  release_pool(host, pool, kept);
}

int main(void) {
  g_base = tt_baseline();
  RUN(test_first_size_is_the_layout_before_free_blocks);
  RUN(test_free_blocks_counts_the_holes);
  RUN(test_an_old_size_caller_gets_the_old_fields_and_nothing_past_them);
  RUN(test_a_newer_callers_extra_fields_are_left_alone);
  RUN(test_a_too_small_struct_size_is_refused_and_nothing_written);
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
  return tt_finish("test_pool_info");
}
