/* A stand-in for bcryptprimitives.dll, which Wine 8 lacks and which every
 * binary from today's Rust imports for ProcessPrng, its source of random
 * bytes. Installed into the Wine prefix only (scripts/windows.sh); real
 * Windows has its own. The bytes come from advapi32's RtlGenRandom. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
