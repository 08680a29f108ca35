// Memory for compiled rule data kept as trivial values: byte views and buffers of plain values, which the
// per-event paths (matching, payload programs) read without retaining anything. Read out of arrays, enums
// and strings, each piece was retained and released again per event (docs/performance.md, 2026-12-07,
// tenth session).

/// Copies of compiled rule data, freed with this object: whatever holds views into it keeps it.
final class TrivialStorage: @unchecked Sendable {
    // @unchecked: copies are made only while the owner is compiled, before anything shares it; after that
    // it is only read, through the views it handed out.
    private var blocks: [UnsafeMutableRawPointer] = []

    deinit {
        for block in blocks { block.deallocate() }
    }

    /// A copy of `elements`, valid while this object lives. Only trivial values (`BitwiseCopyable`): the
    /// memory is freed without deinitializing what is in it.
    func copy<Element: BitwiseCopyable>(_ elements: [Element]) -> UnsafeBufferPointer<Element> {
        let block = UnsafeMutableBufferPointer<Element>.allocate(capacity: max(elements.count, 1))
        _ = block.initialize(from: elements)
        blocks.append(UnsafeMutableRawPointer(block.baseAddress!))
        return UnsafeBufferPointer(start: block.baseAddress, count: elements.count)
    }

    /// The UTF-8 bytes of `text`, valid while this object lives.
    func bytes(_ text: String) -> UnsafeBufferPointer<UInt8> { copy(Array(text.utf8)) }
}
