import CSQLite

/// Memory a statement owns for the text of a row it is about to run, so that
/// SQLite reads the text where it is (`SQLITE_STATIC`) instead of making its
/// own copy of each string (`SQLITE_TRANSIENT`: a `malloc`, a copy and a
/// `free` per string, ~700 instructions, a third of binding a row).
///
/// Text is appended while a row is bound and released once the row has run:
/// the statement then clears its bindings (``Statement/execute()``), so it
/// never holds a pointer into memory that is reused or freed.
struct StatementTextBuffer: ~Copyable {
    private var block: UnsafeMutableRawPointer
    private var capacity: Int
    private var used = 0
    /// Blocks outgrown while this row was bound: its earlier text is still
    /// bound there, so they are freed only when the row is released.
    private var outgrown: [UnsafeMutableRawPointer] = []
    /// Whether text of a row is bound here, not released yet.
    private(set) var isInUse = false

    init(capacity: Int = 256) {
        self.capacity = capacity
        block = .allocate(byteCount: capacity, alignment: 1)
    }

    deinit {
        block.deallocate()
        for block in outgrown { block.deallocate() }
    }

    /// Copies `bytes` here; they stay in place until ``release()``.
    mutating func store(_ bytes: UnsafeBufferPointer<UInt8>) -> UnsafePointer<CChar> {
        if used + bytes.count > capacity {
            outgrown.append(block)
            capacity = max(capacity * 2, bytes.count)
            block = .allocate(byteCount: capacity, alignment: 1)
            used = 0
        }
        let start = block + used
        if let base = bytes.baseAddress { start.copyMemory(from: base, byteCount: bytes.count) }
        used += bytes.count
        isInUse = true
        return UnsafePointer(start.assumingMemoryBound(to: CChar.self))
    }

    /// Forgets the row's text: the caller has unbound it.
    mutating func release() {
        used = 0
        isInUse = false
        if !outgrown.isEmpty {
            for block in outgrown { block.deallocate() }
            outgrown.removeAll()
        }
    }
}
