/*
 * Force-included into prebuilt binaries only (scripts/build-prebuilds.mjs). GCC 12's libstdc++
 * gave std::condition_variable::wait a new symbol version (GLIBCXX_3.4.30) for the same function;
 * binding to the old one keeps the binaries loadable with GCC 11's libstdc++ (RHEL 9, Amazon
 * Linux 2023), where the newest version needed is then GLIBCXX_3.4.29.
 */
#ifdef __cplusplus
__asm__(".symver _ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE,"
        "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE@GLIBCXX_3.4.11");
#endif
