// Plain POSIX file I/O used by tasks: full-length pread/pwrite loops, and the O_DIRECT variants
// that handle unaligned heads and tails.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "sys/direct_span.h"

namespace penstock {

// Reads until n bytes or end of file; -1 with *err set on failure. With O_DIRECT a short,
// unaligned count means end of file.
ssize_t PreadFull(int fd, char* buf, size_t n, uint64_t off, bool direct, int* err);
// Writes all n bytes; returns 0 or an errno.
int PwriteFull(int fd, const char* buf, size_t n, uint64_t off);
// Writes [pos, pos+n) from `data`, where data - (pos % kAlign) is page aligned: the aligned
// interior through directFd (when >= 0), head and tail through fd. Returns 0 or an errno. When
// the file system refused O_DIRECT for the interior and it went through fd, *refused is its errno.
int WriteMaybeDirect(int fd, int directFd, const char* data, uint64_t pos, uint64_t n, int* refused);
// Reads [pos, pos+n) into buf (n + 2*kAlign bytes, page aligned when directFd >= 0); sets where
// the data starts in buf and how much arrived. Returns 0 or an errno; *refused as for writes.
int ReadMaybeDirect(int fd, int directFd, char* buf, uint64_t pos, uint64_t n, char** data, uint64_t* got, int* refused);
// Fraction of `samples` pages, spread evenly over the part of [offset, offset+length) inside the
// file, that are in the page cache (mincore on a mapping that is never touched); -1 when it
// cannot be told (nothing of the range lies inside the file, or the calls fail).
double Residency(int fd, uint64_t offset, uint64_t length, int samples);
// Asks the kernel to drop the file's cached pages (posix_fadvise DONTNEED). Returns 0 or an errno.
int DropCache(int fd);
// The process at the other end of a connected Unix domain socket, as the kernel recorded it when
// the connection was made (getsockopt SO_PEERCRED). Returns 0 or an errno.
int PeerCredentials(int fd, int64_t* pid, int64_t* uid, int64_t* gid);

// Page-aligned per-thread scratch of at least n bytes (nullptr when out of memory).
char* Scratch(size_t n);

}  // namespace penstock
