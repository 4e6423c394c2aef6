/* Test-only stand-in for Windows' bcryptprimitives.dll, which Wine 8 lacks: Rust's std
 * on Windows takes its random bytes (HashMap seeds) from its ProcessPrng export. This
 * answers ProcessPrng from advapi32's SystemFunction036 (RtlGenRandom), which Wine has.
 * Built by .ci/run and placed beside the test executables under Wine; never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
