import Foundation

/// What `MATCHES[search]` comparisons share wherever they run (the parser, the
/// validator, the SQL compiler and the in-memory evaluator): the query on the
/// right and the attributes searched on the left.
///
/// The left side is an attribute key path (`name`, `company.name`,
/// `ANY notes.text`) or `SELF`, which searches every indexed attribute of the
/// object's entity at once, as one document of several columns.
package enum PredicateSearch {
    /// The query a comparison's right side holds.
    ///
    /// - Throws: ``PredicateProblem`` when the right side is not a string, or
    ///   the string is not a valid ``SearchQuery`` (with its offset).
    package static func query(from rhs: PredicateNode) throws -> SearchQuery {
        guard case .constant(.string(let text)) = rhs else {
            throw PredicateProblem("MATCHES[search] needs a search query string after it, as in name MATCHES[search] \"apple pie\"")
        }
        do {
            return try SearchQuery(text)
        } catch {
            throw PredicateProblem("the search query is not valid: \(error)")
        }
    }

    /// The attributes a search of `keys` reads, given where the key path
    /// leads: all the indexed attributes of the entity and its subentities for
    /// `SELF` (or a path ending at an object), the one attribute otherwise.
    ///
    /// - Throws: ``PredicateProblem`` for an attribute that is not indexed
    ///   for search, or an entity without any.
    package static func attributes(_ info: KeyPathInfo, keys: [String]) throws -> [AttributeDescription] {
        if let attribute = info.attribute {
            guard attribute.isSearchIndexed else {
                throw PredicateProblem(
                    "\(attribute.entity?.name ?? "?").\(attribute.name) is not indexed for search: MATCHES[search] needs a String attribute with isIndexedBySpotlight (Xcode: Index in Spotlight)",
                    key: keys.last)
            }
            return [attribute]
        }
        guard let entity = info.entity else {
            throw PredicateProblem("MATCHES[search] needs an attribute or SELF on its left", key: keys.last)
        }
        // Those of subentities too: an object of a subentity is searched in all of its own
        // (PredicateEvaluator.searchDocument), and a row of another entity has no value in them.
        var attributes: [AttributeDescription] = []
        for attribute in entity.selfAndDescendants.flatMap(\.searchIndexedAttributes)
        where !attributes.contains(where: { $0 === attribute }) {
            attributes.append(attribute)
        }
        guard !attributes.isEmpty else {
            throw PredicateProblem("entity \(entity.name) has no attribute indexed for search (isIndexedBySpotlight on a String attribute)", key: keys.last)
        }
        return attributes
    }
}

extension PredicateSearch {
    /// Checks that a relevance sort's key path ends at an attribute indexed for search.
    ///
    /// - Throws: ``FetchPredicateError`` naming the key path.
    static func validateRelevanceSort(_ sort: FetchSort, of entity: EntityDescription) throws {
        do {
            let info = try KeyPathInfo.walk(sort.keyPath, from: entity)
            guard info.attribute != nil else {
                throw PredicateProblem("a relevance sort needs an attribute indexed for search, and \(sort.key) is not an attribute")
            }
            _ = try attributes(info, keys: sort.keyPath)
        } catch let problem as PredicateProblem {
            throw problem.error(format: "relevance sort on \(sort.key)")
        }
    }
}

extension AttributeDescription {
    /// Whether the SQLite store indexes this attribute for full-text search:
    /// a stored String attribute marked ``PropertyDescription/isIndexedBySpotlight``.
    package var isSearchIndexed: Bool {
        isIndexedBySpotlight && type == .string && !isTransient
    }
}

extension EntityDescription {
    /// The entity's attributes indexed for search, inherited ones first: what
    /// `SELF MATCHES[search]` reads, so that a search screen can say where it
    /// looks, or a tool which indexes `SQLiteStore/rebuildSearchIndex()` builds.
    ///
    /// A stored String attribute is indexed when the model marks it
    /// ``PropertyDescription/isIndexedBySpotlight``; other attributes never are.
    public var searchIndexedAttributes: [AttributeDescription] {
        slotProperties.compactMap { ($0 as? AttributeDescription).flatMap { $0.isSearchIndexed ? $0 : nil } }
    }
}
