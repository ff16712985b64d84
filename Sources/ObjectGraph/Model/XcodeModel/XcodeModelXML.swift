import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One element of a model's `contents` file, with where it starts in the file.
///
/// The loader first reads the whole file into these nodes and then maps them onto
/// the model. Keeping the two steps apart means every mapping error can name the
/// line of the element it concerns, and the mapping code never deals with the
/// parser's callbacks.
struct XcodeModelXMLNode: Sendable {
    /// The element name (`entity`, `attribute`, …).
    let name: String
    /// The XML attributes as written.
    let attributes: [String: String]
    /// The child elements, in document order. Text content is not kept: Xcode's
    /// model format puts everything into attributes.
    var children: [XcodeModelXMLNode]
    /// The 1-based line where the element starts.
    let line: Int
    /// The 1-based column the parser reported for the element (where its start tag ends).
    let column: Int

    /// The value of an XML attribute.
    subscript(_ attribute: String) -> String? { attributes[attribute] }

    /// Whether an XML attribute holds Xcode's "YES" (or `true`/`1`, which hand-edited files use).
    func flag(_ attribute: String) -> Bool {
        guard let value = attributes[attribute] else { return false }
        return XcodeModelValues.bool(from: value) ?? false
    }

    /// Reads a file into a tree of nodes.
    ///
    /// The bytes are checked first (``XcodeModelXMLPreflight``): FoundationXML
    /// traps on names that are not UTF-8 and expands a document type's entities.
    /// External entities are not resolved either: a model file never needs them,
    /// and resolving them would let a file make the loader read other files.
    ///
    /// - Throws: ``ModelLoadingError`` `.malformedXML` with the line and column of
    ///   the first byte that is not UTF-8, of a document type, or where the parser
    ///   stopped; or when the file has no root element.
    static func parse(_ data: Data, path: String) throws -> XcodeModelXMLNode {
        try XcodeModelXMLPreflight.check(data, path: path)
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = false
        let builder = TreeBuilder()
        parser.delegate = builder
        let succeeded = parser.parse()
        if !succeeded || builder.failure != nil {
            let failure = builder.failure
            let reason = failure?.message ?? parser.parserError.map { "\($0.localizedDescription)" } ?? "the parser stopped"
            throw ModelLoadingError(.malformedXML, path: path, line: failure?.line ?? parser.lineNumber,
                                    column: failure?.column ?? parser.columnNumber,
                                    message: "the file is not well-formed XML: \(reason)")
        }
        guard let root = builder.root else {
            throw ModelLoadingError(.malformedXML, path: path, line: parser.lineNumber, column: parser.columnNumber,
                                    message: "the file has no XML root element")
        }
        return root
    }
}

/// Collects parser callbacks into ``XcodeModelXMLNode``s.
///
/// Used on one thread for one parse, then dropped.
private final class TreeBuilder: NSObject, XMLParserDelegate {
    /// Elements whose end tag has not been seen yet; the last is the innermost.
    private var stack: [XcodeModelXMLNode] = []
    private(set) var root: XcodeModelXMLNode?
    private(set) var failure: (line: Int, column: Int, message: String)?

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]) {
        stack.append(XcodeModelXMLNode(name: elementName, attributes: attributes, children: [],
                                       line: parser.lineNumber, column: parser.columnNumber))
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        guard let node = stack.popLast() else { return }
        if stack.isEmpty {
            root = node
        } else {
            stack[stack.count - 1].children.append(node)
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        // The first error is the meaningful one; libxml2 reports follow-up errors after it.
        if failure == nil {
            failure = (parser.lineNumber, parser.columnNumber, Self.describe(parseError))
        }
    }

    func parser(_ parser: XMLParser, validationErrorOccurred validationError: any Error) {
        if failure == nil {
            failure = (parser.lineNumber, parser.columnNumber, Self.describe(validationError))
        }
    }

    private static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        return "\(nsError.localizedDescription) (XMLParser error \(nsError.code))"
    }
}
