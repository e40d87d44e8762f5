// A tensor start index (Nx's dynamic slicing) clamped to [0, max_start] on the device, from its
// raw 32-bit words (1- and 2-byte starts in the low bytes of word 0, 8-byte ones in words 0 and
// 1; every tensor buffer is at least 256 bytes), without 64-bit arithmetic. `type`: bits 0-1
// log2 of its bytes, bit 2 signed. Shared by dynamic_offset.comp and copy.comp's STARTS variant.
uint clamped_start(uvec2 words, uint type, uint max_start) {
  uint log2_bytes = type & 3u;
  bool is_signed = (type & 4u) != 0u;
  uint lo = words.x;
  bool negative, beyond_32_bits = false;
  if (log2_bytes == 0u) {
    lo &= 0xffu;
    negative = is_signed && (lo & 0x80u) != 0u;
  } else if (log2_bytes == 1u) {
    lo &= 0xffffu;
    negative = is_signed && (lo & 0x8000u) != 0u;
  } else if (log2_bytes == 2u) {
    negative = is_signed && (lo & 0x80000000u) != 0u;
  } else {
    negative = is_signed && (words.y & 0x80000000u) != 0u;
    beyond_32_bits = !negative && words.y != 0u;
  }
  if (negative) return 0u;
  if (beyond_32_bits) return max_start;
  return min(lo, max_start);
}
