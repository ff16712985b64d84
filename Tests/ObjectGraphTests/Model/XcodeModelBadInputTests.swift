import Foundation
import Testing
@testable import ObjectGraph

/// Damaged and hostile `contents` files: bytes that are not UTF-8 where
/// FoundationXML would trap on them, document types whose entities expand
/// without bound, encodings the loader cannot check, files too large to be a
/// model. Each throws a ``ModelLoadingError`` naming the file and where; none
/// traps or hangs. The edits start from a real model of the fixture corpus.
@Suite struct XcodeModelBadInputTests {
    static let sampleModel = "coredataplus-samplemodel/SampleModel.xcdatamodeld/SampleModel.xcdatamodel/contents"

    /// Writes `data` as the `contents` file of a new version folder and loads it.
    private func load(_ data: Data, in workspace: FixtureWorkspace) throws -> XcodeModelLoader.LoadedModel {
        let file = workspace.url.appendingPathComponent("Edited.xcdatamodel/contents")
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
        return try XcodeModelLoader.load(file.deletingLastPathComponent())
    }

    /// Loads `data`, expecting a ``ModelLoadingError`` about the edited file.
    private func loadError(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) throws -> ModelLoadingError {
        let workspace = try FixtureWorkspace()
        let error = try #require(throws: ModelLoadingError.self, sourceLocation: sourceLocation) { try load(data, in: workspace) }
        #expect(error.path == workspace.url.appendingPathComponent("Edited.xcdatamodel/contents").path, sourceLocation: sourceLocation)
        return error
    }

    private func sample() throws -> [UInt8] {
        [UInt8](try Data(contentsOf: CoreDataFixtures.url(Self.sampleModel)))
    }

    /// The byte offset of the first occurrence of `needle` in `bytes`.
    private func offset(of needle: String, in bytes: [UInt8]) -> Int? {
        bytes.firstRange(of: Array(needle.utf8))?.lowerBound
    }

    // MARK: - Bytes that are not UTF-8

    /// The names of elements and XML attributes of the real model, each with a
    /// byte that cannot start or continue UTF-8 in its middle: FoundationXML
    /// force-unwraps names as UTF-8 and trapped on every one of these.
    @Test(arguments: [0xFF, 0x80, 0xC3, 0xED] as [UInt8])
    func aBadByteInAnElementOrAttributeNameThrowsWithItsOffsetAndLine(byte: UInt8) throws {
        let original = try sample()
        // A name starts after `<` or a space; three bytes in is inside each of these.
        let positions = try ["<entity ", "<attribute ", "<relationship ", " name=\"", " attributeType=\"", " syncable=\"", "<model "]
            .map { try #require(offset(of: $0, in: original)) + 3 }
        for position in positions {
            var mutated = original
            mutated[position] = byte
            let error = try loadError(Data(mutated))
            let line = original[..<position].count(where: { $0 == 0x0A }) + 1
            #expect(error.code == .malformedXML, "\(error)")
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains("byte offset \(position)") && error.message.contains("UTF-8"), "\(error)")
        }
    }

    @Test func aBadByteInAnAttributeValueOrACommentThrowsToo() throws {
        let original = try sample()
        var inValue = original
        inValue[try #require(offset(of: "name=\"", in: original)) + 7] = 0xFE
        let valueError = try loadError(Data(inValue))
        #expect(valueError.code == .malformedXML && valueError.line == 3 && valueError.message.contains("UTF-8"), "\(valueError)")
        // A comment before the root element: FoundationXML force-unwraps comments as UTF-8 too.
        let declarationEnd = try #require(original.firstIndex(of: 0x0A))
        let comment = Array("<!-- caf".utf8) + [0xE9] + Array(" -->\n".utf8)
        let commented = Array(original[...declarationEnd]) + comment + Array(original[(declarationEnd + 1)...])
        let commentError = try loadError(Data(commented))
        #expect(commentError.code == .malformedXML && commentError.line == 2, "\(commentError)")
    }

    /// 2,000 copies of the real model with one to three bytes replaced by bytes
    /// above 0x7F, deterministically: each loads or throws, none traps (the
    /// reliability campaign trapped on 87 of 1,800 such models).
    @Test func randomHighBytesInARealModelThrowOrLoad() throws {
        let original = try sample()
        var random = SplitMix64(seed: 0x5EED_0C0D)
        let workspace = try FixtureWorkspace()
        var thrown = 0
        for _ in 0..<2000 {
            var mutated = original
            for _ in 0..<(1 + Int.random(in: 0..<3, using: &random)) {
                mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0x80...0xFF, using: &random)
            }
            do {
                _ = try load(Data(mutated), in: workspace)
            } catch let error as ModelLoadingError {
                #expect(error.line != nil, "\(error)")
                thrown += 1
            }
        }
        #expect(thrown > 1900)
    }

    @Test func aValidNonASCIINameStillLoads() throws {
        let workspace = try FixtureWorkspace()
        let file = try workspace.write("""
            <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Café" representedClassName="Café"><attribute name="größe" attributeType="String"/></entity>
            </model>
            """, to: "Unicode.xcdatamodel/contents")
        let model = try ManagedObjectModel(contentsOf: file)
        #expect(model.entitiesByName["Café"]?.attributesByName["größe"] != nil)
    }

    // MARK: - Encodings

    @Test(arguments: ["ISO-8859-1", "UTF-16", "Shift_JIS", "EBCDIC-US"])
    func aDeclaredEncodingOtherThanUTF8IsRefused(encoding: String) throws {
        let text = String(decoding: try sample(), as: UTF8.self).replacingOccurrences(of: "encoding=\"UTF-8\"", with: "encoding=\"\(encoding)\"")
        let error = try loadError(Data(text.utf8))
        #expect(error.code == .malformedXML && error.line == 1, "\(error)")
        #expect(error.message.contains("encoding \"\(encoding)\"") && error.message.contains("UTF-8"), "\(error)")
    }

    @Test func utf8DeclaredInAnyCaseAndAByteOrderMarkLoad() throws {
        let text = String(decoding: try sample(), as: UTF8.self).replacingOccurrences(of: "encoding=\"UTF-8\"", with: "encoding='utf-8'")
        let workspace = try FixtureWorkspace()
        #expect(try load(Data([0xEF, 0xBB, 0xBF] + Array(text.utf8)), in: workspace).model.entities.count > 0)
        #expect(try load(Data(text.replacingOccurrences(of: " encoding='utf-8'", with: "").utf8), in: workspace).model.entities.count > 0)
    }

    @Test func aUTF16FileIsRefusedByItsByteOrderMark() throws {
        let text = String(decoding: try sample(), as: UTF8.self).replacingOccurrences(of: "encoding=\"UTF-8\"", with: "encoding=\"UTF-16\"")
        for bigEndian in [false, true] {
            let units = text.utf16.flatMap { bigEndian ? [UInt8($0 >> 8), UInt8($0 & 0xFF)] : [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
            let error = try loadError(Data((bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE]) + units))
            #expect(error.code == .malformedXML && error.message.contains("UTF-16"), "\(error)")
        }
    }

    // MARK: - Document types and entities

    /// Ten levels of ten references each: 10^10 "lol"s if expanded.
    @Test func aBillionLaughsModelIsRefusedQuickly() throws {
        var declarations = #"<!ENTITY lol0 "lol">"#
        for level in 1...10 {
            declarations += "\n<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1);", count: 10) + "\">"
        }
        let text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE model [
            \(declarations)
            ]>
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Item"><attribute name="title" attributeType="String" defaultValueString="&lol10;"/></entity>
            </model>
            """
        let clock = ContinuousClock()
        var error: ModelLoadingError?
        let elapsed = try clock.measure { error = try loadError(Data(text.utf8)) }
        #expect(elapsed < .seconds(1))
        #expect(error?.code == .malformedXML && error?.line == 2, "\(String(describing: error))")
        #expect(error?.message.contains("document type") == true, "\(String(describing: error))")
    }

    @Test func anEntityDeclarationOrAnExternalDocumentTypeIsRefused() throws {
        let body = """
            <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                <entity name="Item"><attribute name="title" attributeType="String" defaultValueString="&greeting;"/></entity>
            </model>
            """
        for prolog in [
            #"<!DOCTYPE model [ <!ENTITY greeting "hello"> ]>"#,
            #"<!DOCTYPE model SYSTEM "file:///etc/passwd">"#,
            "<!-- a comment first -->\n<?editor x?>\n<!DOCTYPE model [ <!ENTITY greeting SYSTEM \"file:///etc/hostname\"> ]>",
        ] {
            let error = try loadError(Data("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\(prolog)\n\(body)".utf8))
            #expect(error.code == .malformedXML && error.message.contains("document type"), "\(error)")
        }
        // Without a document type the reference is undeclared: a parse error, not an expansion.
        let undeclared = try loadError(Data("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\(body)".utf8))
        #expect(undeclared.code == .malformedXML, "\(undeclared)")
    }

    // MARK: - Processing instructions

    /// FoundationXML passed the missing data of `<?li?>` to strlen and crashed
    /// (found by the xcode-model fuzz target); Xcode writes no processing
    /// instruction but the XML declaration.
    @Test(arguments: ["<?li?>", "<?xml-stylesheet href=\"a.css\"?>", "<?editor x?>"])
    func aProcessingInstructionOtherThanTheDeclarationIsRefused(instruction: String) throws {
        let alone = try loadError(Data(instruction.utf8))
        #expect(alone.code == .malformedXML && alone.message.contains("processing instruction") && alone.line == 1, "\(alone)")
        var bytes = try sample()
        let inside = try #require(offset(of: "<entity", in: bytes))
        bytes.insert(contentsOf: Array(instruction.utf8), at: inside)
        let error = try loadError(Data(bytes))
        #expect(error.code == .malformedXML && error.message.contains("byte offset \(inside)"), "\(error)")
    }

    // MARK: - Size

    @Test func aFileLargerThanTheLimitIsRefusedWithoutReadingIt() throws {
        let workspace = try FixtureWorkspace()
        let file = workspace.url.appendingPathComponent("Huge.xcdatamodel/contents")
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: file.path, contents: Data("<?xml version=\"1.0\"?>\n<model>".utf8)))
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: UInt64(XcodeModelLoader.maximumFileSize) + 1)   // sparse: nothing is written
        try handle.close()
        let error = try #require(throws: ModelLoadingError.self) { try XcodeModelLoader.load(file) }
        #expect(error.code == .unreadable && error.message.contains("\(XcodeModelLoader.maximumFileSize)"), "\(error)")
    }
}
