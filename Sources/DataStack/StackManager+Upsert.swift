import Foundation

// MARK: - Import loops that update what exists

extension StackManager {
    /// Imports a sequence of inputs in chunks, as
    /// ``performImport(_:chunkSize:onConflict:_:progress:)`` does, handing `body` the
    /// object each input is about — the stored one whose `attribute` equals
    /// the input's `key`, or a new one with that key — so that a feed can be
    /// imported again and again without duplicates.
    ///
    /// ```swift
    /// try await stack.performImport(quotes, upserting: Company.self, by: "symbol", key: \.symbol) { quote, company, _ in
    ///     company.price = quote.price
    /// }
    /// ```
    ///
    /// Each chunk finds its existing objects with one query (`attribute IN
    /// keys`), as RestKit's managed object cache does, rather than a fetch per
    /// input; inputs with the same key in a chunk share one object. Two
    /// importers — in this process or others — that insert the same new key
    /// at once both save: declare the attribute unique
    /// (``EntityDescription/uniquenessConstraints``) and the store settles the
    /// race at save with the importer's merge policy (the incoming values win,
    /// ``MergePolicy/mergeByPropertyObjectTrump``), leaving one row per key —
    /// or, with ``ImportConflictResolution/rebuildChunk(attempts:)``, by
    /// building the chunk again, when the other importer's row is found.
    /// Without the constraint each would insert its own.
    ///
    /// - Parameters:
    ///   - type: the objects' class; its entity is looked up in the model.
    ///   - attribute: the attribute that identifies an object, holding `key`'s values.
    ///   - key: the key of an input.
    ///   - onConflict: what a save that meets another writer's changes does
    ///     (``ImportConflictResolution``); the default keeps the chunk's values.
    ///   - body: updates the input's object (new objects already hold their key).
    /// - Throws: ``StackError`` when the entity or attribute is not in the
    ///   model, or stored keys are of another type than `Key`; otherwise what ``performImport(_:chunkSize:onConflict:_:progress:)`` throws.
    @discardableResult
    public func performImport<Inputs: Sequence, Object: ManagedObject, Key: Hashable & Sendable>(
        _ inputs: Inputs,
        chunkSize: Int = 1_000,
        upserting type: Object.Type,
        by attribute: String,
        key: @escaping @Sendable (Inputs.Element) -> Key,
        onConflict: ImportConflictResolution = .mergeByPropertyObjectTrump,
        _ body: @escaping @Sendable (Inputs.Element, Object, ManagedObjectContext) throws -> Void,
        progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) async throws -> ImportProgress where Inputs.Element: Sendable {
        let entity = try upsertEntity(for: type, attribute: attribute)
        return try await performChunkedImport(inputs, chunkSize: chunkSize, onConflict: onConflict, progress: progress) { chunk, context in
            let keys = chunk.map(key)
            var objects: [Key: Object] = try Self.stored(Object.self, entity: entity, attribute: attribute, keys: keys, in: context)
            for (input, value) in zip(chunk, keys) {
                let object: Object
                if let existing = objects[value] {
                    object = existing
                } else {
                    let made = Object(entity: entity, insertInto: context)
                    try made.setValue(value, forKey: attribute)
                    objects[value] = made
                    object = made
                }
                try body(input, object, context)
            }
        }
    }

    /// The stored objects whose `attribute` holds one of `keys`, by key, loaded.
    ///
    /// - Throws: ``StackError/Code/keyTypeMismatch`` for a stored key of another
    ///   type than `Key`, which would look absent and be inserted again.
    private static func stored<Object: ManagedObject, Key: Hashable>(_ type: Object.Type, entity: EntityDescription, attribute: String,
                                                                     keys: [Key], in context: ManagedObjectContext) throws -> [Key: Object] {
        var request = FetchRequest<ManagedObject>(entityName: entity.name)
        // One query: a long key list is bound as one JSON array (PredicateSQLList), not a parameter per key.
        request.predicate = try FetchPredicate(format: "%K IN %@", argumentArray: [attribute, Array(Set(keys))])
        request.returnsObjectsAsFaults = false
        var objects: [Key: Object] = [:]
        for case let object as Object in try context.fetch(request) {
            let stored = try object.value(forKey: attribute)
            guard let value = key(stored, as: Key.self) else {
                let storedType = stored.map { "\(Swift.type(of: $0))" } ?? "nil"
                throw StackError(.keyTypeMismatch, message: """
                    \(entity.name).\(attribute) holds \(storedType) values, not the import's keys of type \(Key.self)
                    """)
            }
            objects[value] = object
        }
        return objects
    }

    /// A stored attribute value as an import key: as it is, or an integer of
    /// another width (key-value coding reads every integer attribute as `Int`,
    /// and an `Int64` key must still find it).
    private static func key<Key>(_ stored: Any?, as type: Key.Type) -> Key? {
        if let key = stored as? Key { return key }
        guard let integer = stored as? any BinaryInteger, let integerType = Key.self as? any BinaryInteger.Type else { return nil }
        func converted<Target: BinaryInteger>(_ target: Target.Type, _ value: some BinaryInteger) -> Target? { Target(exactly: value) }
        return converted(integerType, integer) as? Key
    }

    /// The entity of `type` in the stack's model, checked to have `attribute`.
    private func upsertEntity(for type: ManagedObject.Type, attribute: String) throws -> EntityDescription {
        let model = try openSetup(for: "performImport(_:upserting:by:key:_:)").model
        // By class over all entities: the model's class index leaves out entities
        // of the plain `ManagedObject` class, which an upsert of them names.
        let entities = model.entities.filter { $0.managedObjectClass == type }
        guard entities.count == 1, let entity = entities.first else {
            // None, or several (a parent and a subentity sharing a class: the wrong one
            // would miss the other's rows and insert them again).
            let names = entities.map(\.name).sorted()
            throw StackError(.notInModel, message: names.isEmpty ? "no entity of the model has the class \(type)"
                : "entities \(names.joined(separator: ", ")) all have the class \(type): name one class per entity to upsert")
        }
        guard entity.attributesByName[attribute] != nil else {
            throw StackError(.notInModel, message: "entity \(entity.name) has no attribute \(attribute) to find existing objects by")
        }
        return entity
    }
}
