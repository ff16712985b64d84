import Foundation

/// The checks a `contents` file's bytes pass before FoundationXML sees them.
///
/// FoundationXML cannot be trusted with three kinds of input. It hands element
/// and attribute names, comments and processing instructions to its delegate
/// by force-unwrapping them as UTF-8, so one byte that is not UTF-8 in a name
/// traps the process (SIGILL in `_NSXMLParserStartElementNs`) where the same
/// byte in an attribute value is a parse error. And it parses with entity
/// substitution on (libxml2's `XML_PARSE_NOENT`), so the entities of a
/// document type expand inside the process: ten nested entities of ten
/// references each ("billion laughs") ask for 10^10 copies. And it passes a
/// processing instruction's data to `strlen` without checking for none, so
/// `<?x?>` crashes it (found by the `xcode-model` fuzz target).
///
/// Xcode writes neither: a model's `contents` is UTF-8 and has no document
/// type. So anything else is refused here, with the byte offset and line:
/// - an encoding other than UTF-8: a UTF-16 or UTF-32 byte order mark, NUL
///   bytes in the first four (UTF-16 or UTF-32 without one), or another
///   `encoding` in the XML declaration. Bytes in an encoding the loader does
///   not decode cannot be checked, and libxml2 would transcode them unchecked;
/// - a byte sequence that is not UTF-8 (including overlong forms, surrogates
///   and code points past U+10FFFF, which Swift's decoder rejects as well);
/// - a document type declaration (`<!DOCTYPE`), which is where entities are
///   declared and where an external subset would make the parser read other files;
/// - a processing instruction (`<?target …?>`) other than the XML declaration
///   at the start.
enum XcodeModelXMLPreflight {
    /// The encoding names the XML declaration may give (compared ignoring case).
    static let acceptedEncodings: Set<String> = ["utf-8"]

    /// Throws ``ModelLoadingError`` `.malformedXML` for the first problem in `data`.
    ///
    /// - Complexity: O(*n*), *n* = the file's length.
    static func check(_ data: Data, path: String) throws {
        let bytes = [UInt8](data)
        func refuse(at offset: Int, _ message: String) -> ModelLoadingError {
            let (line, column) = location(of: offset, in: bytes)
            return ModelLoadingError(.malformedXML, path: path, line: line, column: column, message: message)
        }
        var start = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            start = 3
        } else if let mark = foreignByteOrderMark(bytes) {
            throw refuse(at: 0, "the file is \(mark) (by its byte order mark); only UTF-8 is read, the encoding Xcode writes")
        } else if bytes.prefix(4).contains(0) {
            throw refuse(at: 0, "the file starts with a NUL byte, as UTF-16 or UTF-32 without a byte order mark does; only UTF-8 is read, the encoding Xcode writes")
        }
        if let (encoding, offset) = declaredEncoding(bytes, from: start), !acceptedEncodings.contains(encoding.lowercased()) {
            throw refuse(at: offset, "the XML declaration names encoding \"\(encoding)\"; only UTF-8 is read, the encoding Xcode writes")
        }
        if let (offset, length) = firstInvalidUTF8(bytes) {
            let shown = bytes[offset..<offset + length].map { String(format: "0x%02X", $0) }.joined(separator: " ")
            throw refuse(at: offset, "the bytes at byte offset \(offset) (\(shown)) are not UTF-8, in which the file declares or defaults to being written")
        }
        if let offset = documentTypeDeclaration(bytes, from: start) {
            throw refuse(at: offset, "the file declares a document type (<!DOCTYPE …>) at byte offset \(offset), which Xcode never writes: its entities could expand without bound and its external subset would read other files, so it is refused")
        }
        if let offset = processingInstruction(bytes, from: start) {
            throw refuse(at: offset, "the file has a processing instruction (<?…?>) at byte offset \(offset), which Xcode never writes (only the XML declaration at the start), so it is refused")
        }
    }

    // MARK: - Encoding

    /// The encoding a UTF-16 or UTF-32 byte order mark at the start names.
    private static func foreignByteOrderMark(_ bytes: [UInt8]) -> String? {
        if bytes.starts(with: [0x00, 0x00, 0xFE, 0xFF]) { return "UTF-32 big-endian" }
        if bytes.starts(with: [0xFF, 0xFE, 0x00, 0x00]) { return "UTF-32 little-endian" }
        if bytes.starts(with: [0xFE, 0xFF]) { return "UTF-16 big-endian" }
        if bytes.starts(with: [0xFF, 0xFE]) { return "UTF-16 little-endian" }
        return nil
    }

    /// The `encoding` pseudo-attribute of the XML declaration at `start`, with
    /// the offset of its value; nil when there is no declaration or it names none.
    private static func declaredEncoding(_ bytes: [UInt8], from start: Int) -> (String, Int)? {
        guard bytes[start...].starts(with: Array("<?xml".utf8)),
              let end = find("?>", in: bytes, from: start),
              let name = find("encoding", in: bytes[..<end], from: start) else { return nil }
        var index = name + "encoding".utf8.count
        func skipSpace() { while index < end, isSpace(bytes[index]) { index += 1 } }
        skipSpace()
        guard index < end, bytes[index] == UInt8(ascii: "=") else { return nil }
        index += 1
        skipSpace()
        guard index < end, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else { return nil }
        let quote = bytes[index]
        let valueStart = index + 1
        guard let valueEnd = bytes[valueStart..<end].firstIndex(of: quote) else { return nil }
        return (String(decoding: bytes[valueStart..<valueEnd], as: UTF8.self), valueStart)
    }

    // MARK: - UTF-8

    /// The offset and length of the first byte sequence that is not UTF-8.
    private static func firstInvalidUTF8(_ bytes: [UInt8]) -> (offset: Int, length: Int)? {
        if String(validating: bytes, as: UTF8.self) != nil { return nil }
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let scalar): offset += scalar.count
            case .error(let length): return (offset, max(length, 1))
            case .emptyInput: return nil
            }
        }
    }

    // MARK: - Document type

    /// The offset of a `<!DOCTYPE` in the prolog: after the XML declaration,
    /// whitespace, comments and processing instructions, before the root element
    /// (the only place one can be).
    private static func documentTypeDeclaration(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index < bytes.count {
            let rest = bytes[index...]
            if isSpace(bytes[index]) {
                index += 1
            } else if rest.starts(with: Array("<?".utf8)), let end = find("?>", in: bytes, from: index + 2) {
                index = end + 2
            } else if rest.starts(with: Array("<!--".utf8)), let end = find("-->", in: bytes, from: index + 4) {
                index = end + 3
            } else if rest.starts(with: Array("<!DOCTYPE".utf8)) {
                return index
            } else {
                return nil
            }
        }
        return nil
    }

    // MARK: - Processing instructions

    /// The offset of the first `<?` that does not open the XML declaration at
    /// the file's start (`<?xml` and whitespace). A `<?` in a comment counts
    /// too: Xcode writes no comments, and refusing it keeps the check one scan.
    private static func processingInstruction(_ bytes: [UInt8], from start: Int) -> Int? {
        var from = start
        let declaration = Array("<?xml".utf8)
        if bytes[start...].starts(with: declaration), start + declaration.count < bytes.count,
           isSpace(bytes[start + declaration.count]), let end = find("?>", in: bytes, from: start + declaration.count) {
            from = end + 2
        }
        return find("<?", in: bytes, from: from)
    }

    // MARK: - Helpers

    /// The offset of the first `pattern` in `bytes` at or after `start`.
    private static func find(_ pattern: String, in bytes: ArraySlice<UInt8>, from start: Int) -> Int? {
        guard start <= bytes.endIndex else { return nil }
        return bytes[start...].firstRange(of: Array(pattern.utf8))?.lowerBound
    }

    private static func find(_ pattern: String, in bytes: [UInt8], from start: Int) -> Int? {
        find(pattern, in: bytes[...], from: start)
    }

    /// XML's whitespace: space, tab, carriage return, line feed.
    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// The 1-based line and byte column of `offset`.
    private static func location(of offset: Int, in bytes: [UInt8]) -> (line: Int, column: Int) {
        let before = bytes[..<offset]
        let lineStart = before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
        return (before.count(where: { $0 == 0x0A }) + 1, offset - lineStart + 1)
    }
}
