// Comparing a GGUF file read back with the writer that laid it out.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/model/gguf_file.h"
#include "runtime/model/gguf_writer.h"

namespace layerstream::testing {

// `f` holds `w`'s metadata (keys and values, in order) and its tensors, each
// at the data section's start plus its relative offset, aligned to `alignment`.
inline void expect_file_matches_layout(const GgufFile& f, const GgufWriter& w, uint64_t alignment) {
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset(), w.data_offset());
  ASSERT_EQ(f.metadata().size(), w.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, w.metadata()[i].key);
    EXPECT_TRUE(f.metadata()[i].value == w.metadata()[i].value) << w.metadata()[i].key;
  }
  ASSERT_EQ(f.tensors().size(), w.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    GgufTensorInfo want = w.tensors()[i];
    want.offset = w.data_offset() + want.rel_offset;
    EXPECT_EQ(f.tensors()[i], want) << want.name;
    EXPECT_EQ(f.tensors()[i].offset % alignment, 0u) << want.name;
  }
}

}  // namespace layerstream::testing
