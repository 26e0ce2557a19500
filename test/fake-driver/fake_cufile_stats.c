/*
 * Test-only fake of libcufile.so.0, statistics part. Level-3 statistics are how the addon tells a
 * direct (GPUDirect) read from one cuFile quietly served through POSIX in compatibility mode, so
 * FAKE_CUFILE_MODE decides which counter each call lands in.
 */
#define _GNU_SOURCE
#include "fake_cufile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One GPU's counters in the level-3 block, in ABI order (uint64 fields, 248 bytes). */
typedef struct {
  unsigned char uuid[16];
  uint64_t read_bytes, read_bw_bytes_per_sec, read_utilization, read_duration_us;
  uint64_t n_total_reads, n_p2p_reads, n_nvfs_reads, n_posix_reads, n_unaligned_reads;
  uint64_t n_dr_reads, n_sparse_regions, n_inline_regions, n_reads_err;
  uint64_t writes_bytes, write_bw_bytes_per_sec, write_utilization, write_duration_us;
  uint64_t n_total_writes, n_p2p_writes, n_nvfs_writes, n_posix_writes, n_unaligned_writes;
  uint64_t n_dr_writes, n_writes_err;
  uint64_t n_mmap, n_mmap_ok, n_mmap_err, n_mmap_free;
  uint64_t reg_bytes;
} fake_gpu_stats;

/* Levels 1 and 2 occupy the first 1024 bytes; the fake leaves them zero. */
typedef struct {
  unsigned char levels_1_2[1024];
  uint32_t num_gpus;
  uint32_t padding;
  fake_gpu_stats gpus[FAKE_MAX_GPUS];
} fake_stats_l3;

_Static_assert(sizeof(fake_gpu_stats) == 248, "per-GPU entry");
_Static_assert(offsetof(fake_gpu_stats, n_total_reads) == 48, "n_total_reads");
_Static_assert(offsetof(fake_gpu_stats, n_p2p_reads) == 56, "n_p2p_reads");
_Static_assert(offsetof(fake_gpu_stats, n_nvfs_reads) == 64, "n_nvfs_reads");
_Static_assert(offsetof(fake_gpu_stats, n_posix_reads) == 72, "n_posix_reads");
_Static_assert(offsetof(fake_gpu_stats, n_unaligned_reads) == 80, "n_unaligned_reads");
_Static_assert(offsetof(fake_gpu_stats, n_reads_err) == 112, "n_reads_err");
_Static_assert(offsetof(fake_gpu_stats, n_nvfs_writes) == 168, "n_nvfs_writes");
_Static_assert(offsetof(fake_gpu_stats, n_posix_writes) == 176, "n_posix_writes");
_Static_assert(offsetof(fake_gpu_stats, reg_bytes) == 240, "reg_bytes");
_Static_assert(offsetof(fake_stats_l3, num_gpus) == 1024, "num_gpus");
_Static_assert(offsetof(fake_stats_l3, gpus) == 1032, "per_gpu_stats");
_Static_assert(sizeof(fake_stats_l3) == 5000, "CUfileStatsLevel3_t");

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_level;
static int g_started;
static fake_gpu_stats g_gpus[FAKE_MAX_GPUS];
static long long g_reg_bytes[FAKE_MAX_GPUS];

static int stats_disabled(void) { return fake_env_ll("FAKE_CUFILE_NO_STATS", 0) != 0; }

static int compat_mode(void) {
  const char *mode = getenv("FAKE_CUFILE_MODE");
  return mode && strcmp(mode, "compat") == 0;
}

void fcf_stats_io(int device, int write, int ok, size_t bytes, int unaligned) {
  if (device < 0 || device >= FAKE_MAX_GPUS) return;
  int compat = compat_mode();
  pthread_mutex_lock(&g_mu);
  if (g_started && g_level > 0) {
    fake_gpu_stats *g = &g_gpus[device];
    if (!ok) {
      if (write) g->n_writes_err++;
      else g->n_reads_err++;
    } else if (write) {
      g->n_total_writes++;
      g->writes_bytes += bytes;
      if (compat) g->n_posix_writes++;
      else g->n_nvfs_writes++;
      if (unaligned) g->n_unaligned_writes++;
    } else {
      g->n_total_reads++;
      g->read_bytes += bytes;
      if (compat) g->n_posix_reads++;
      else g->n_nvfs_reads++;
      if (unaligned) g->n_unaligned_reads++;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void fcf_stats_registered(int device, long long delta) {
  if (device < 0 || device >= FAKE_MAX_GPUS) return;
  pthread_mutex_lock(&g_mu);
  g_reg_bytes[device] += delta;
  pthread_mutex_unlock(&g_mu);
}

FAKE_API CUfileError_t cuFileSetStatsLevel(int level) {
  if (stats_disabled() || level < 0 || level > 3) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  pthread_mutex_lock(&g_mu);
  g_level = level;
  pthread_mutex_unlock(&g_mu);
  return fcf_status(CU_FILE_SUCCESS, 0);
}

FAKE_API CUfileError_t cuFileGetStatsLevel(int *level) {
  if (stats_disabled() || !level) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  pthread_mutex_lock(&g_mu);
  *level = g_level;
  pthread_mutex_unlock(&g_mu);
  return fcf_status(CU_FILE_SUCCESS, 0);
}

static CUfileError_t set_started(int started) {
  if (stats_disabled()) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  pthread_mutex_lock(&g_mu);
  g_started = started;
  pthread_mutex_unlock(&g_mu);
  return fcf_status(CU_FILE_SUCCESS, 0);
}

FAKE_API CUfileError_t cuFileStatsStart(void) { return set_started(1); }

FAKE_API CUfileError_t cuFileStatsStop(void) { return set_started(0); }

FAKE_API CUfileError_t cuFileStatsReset(void) {
  if (stats_disabled()) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  pthread_mutex_lock(&g_mu);
  memset(g_gpus, 0, sizeof g_gpus);
  pthread_mutex_unlock(&g_mu);
  return fcf_status(CU_FILE_SUCCESS, 0);
}

FAKE_API CUfileError_t cuFileGetStatsL3(void *out) {
  if (stats_disabled() || !out) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  int count = 0;
  if (cuDeviceGetCount(&count) != 0) count = 0;
  /* Built on the heap and copied once, so the caller never sees a half-filled block. */
  fake_stats_l3 *block = calloc(1, sizeof *block);
  if (!block) return fcf_status(CU_FILE_INTERNAL_ERROR, 0);
  pthread_mutex_lock(&g_mu);
  int ready = g_level >= 3 && g_started;
  if (ready) {
    block->num_gpus = (uint32_t)(count > FAKE_MAX_GPUS ? FAKE_MAX_GPUS : count);
    memcpy(block->gpus, g_gpus, sizeof g_gpus);
    for (int i = 0; i < FAKE_MAX_GPUS; i++) block->gpus[i].reg_bytes = (uint64_t)g_reg_bytes[i];
  }
  pthread_mutex_unlock(&g_mu);
  if (ready) memcpy(out, block, sizeof *block);
  free(block);
  return fcf_status(ready ? CU_FILE_SUCCESS : CU_FILE_INVALID_VALUE, 0);
}
