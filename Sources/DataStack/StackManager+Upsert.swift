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
    /// keys`, their values loaded), as RestKit's managed object cache does,
    /// rather than a fetch per input; inputs with the same key in a chunk
    /// share one object. Keys are converted once, as
    /// ``ManagedObject/setValue(_:forKey:)`` converts them. Two
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
        let (entity, keyAttribute) = try upsertEntity(for: type, attribute: attribute)
        return try await performChunkedImport(inputs, chunkSize: chunkSize, onConflict: onConflict, progress: progress) { chunk, context in
            // Each key once as the attribute's slot value, as setValue(_:forKey:) would convert it
            // (throwing its error for a key the attribute cannot take): the lookup binds it, a
            // new object takes it, and inputs find their objects by it without a dynamic cast.
            let values = try Self.slotValues(chunk.map(key), for: keyAttribute, entity: entity.name)
            let unique = entity.uniquenessConstraints.contains([keyAttribute.name])
            // Distinct keys (most feeds' chunks) find their objects by position, without a hash.
            if KeyDistinctness.areDistinct(values) {
                let found = try Self.stored(byPosition: Object.self, entity: entity, attribute: keyAttribute, values: values,
                                            keyType: Key.self, in: context)
                var absent: [PropertyValue] = []
                var holders: [(object: ManagedObject, value: PropertyValue)] = []
                if unique { holders.reserveCapacity(values.count) }
                for position in chunk.indices {
                    let value = values[position]
                    let object: Object
                    if let existing = found.objects[position] {
                        object = unsafeDowncast(existing, to: Object.self)
                    } else {
                        object = Object(entity: entity, insertInto: context)
                        object.writeSlot(value, at: keyAttribute.index)
                        if unique && !found.heldByOthers[position] { absent.append(value) }
                    }
                    if unique { holders.append((object, value)) }
                    try body(chunk[position], object, context)
                }
                // The keys no row holds, and every object of the chunk by its distinct key: the
                // save's uniqueness check need neither look them up nor group them (a row another
                // writer saves with one now meets the store's unique index, and the save's resolver
                // settles it as the check would). Vouched for only when no row of another class
                // holds a key: the object made for it must be looked up.
                if unique {
                    context.uniqueValuesFoundAbsent = UniqueValuesFoundAbsent(entity: entity, key: keyAttribute.name, absent: absent,
                                                                              holders: found.heldByOthers.contains(true) ? [] : holders)
                }
                return
            }
            // By value, of the concrete class: a dictionary of the generic `Object` would hash
            // and probe through unspecialized generic code. Every object in it is an `Object`.
            var objects: [PropertyValue: ManagedObject]
            let absent: Set<PropertyValue>
            let repeats: Bool
            (objects, absent, repeats) = try Self.stored(Object.self, entity: entity, attribute: keyAttribute, values: values,
                                                         keyType: Key.self, in: context)
            // The keys no row holds: the save's uniqueness check need not look them up again
            // (a row another writer saves with one now meets the store's unique index, and the
            // save's resolver settles it as the check would).
            if unique {
                context.uniqueValuesFoundAbsent = UniqueValuesFoundAbsent(entity: entity, key: keyAttribute.name, values: absent)
            }
            for position in chunk.indices {
                let value = values[position]
                let object: Object
                if let existing = objects[value] {
                    object = unsafeDowncast(existing, to: Object.self)
                } else {
                    let made = Object(entity: entity, insertInto: context)
                    made.writeSlot(value, at: keyAttribute.index)
                    // Found again only by a later input with the same key: a chunk of distinct keys skips the hash.
                    if repeats { objects[value] = made }
                    object = made
                }
                try body(chunk[position], object, context)
            }
        }
    }

    /// `keys` as slot values of `attribute`: what ``ManagedObject/setValue(_:forKey:)``
    /// stores for each (strings without a dynamic cast per key).
    ///
    /// - Throws: the error `setValue(_:forKey:)` throws for a key the attribute cannot take.
    private static func slotValues<Key>(_ keys: [Key], for attribute: AttributeDescription, entity: String) throws -> [PropertyValue] {
        if Key.self == String.self, attribute.type == .string, !attribute.archivesValues {
            return unsafeBitCast(keys, to: [String].self).map(PropertyValue.string)
        }
        return try keys.map { try PropertyValue($0, for: attribute, entity: entity) }
    }

    /// The stored objects whose `attribute` holds one of `values`, by value,
    /// all of class `Object`, loaded: one query, its `IN` list built as a
    /// tree (no format to parse, no argument to cast); the values no object
    /// found holds; and whether `values` holds a key twice.
    ///
    /// - Throws: ``StackError/Code/keyTypeMismatch`` for a stored key that
    ///   reads as another type than `Key`, or that the query matched but that
    ///   equals none of `values`: either would look absent and be inserted again.
    private static func stored<Object: ManagedObject, Key>(_ type: Object.Type, entity: EntityDescription, attribute: AttributeDescription,
                                                           values: [PropertyValue], keyType: Key.Type,
                                                           in context: ManagedObjectContext) throws
        -> (found: [PropertyValue: ManagedObject], absent: Set<PropertyValue>, repeats: Bool) {
        var unique = Set<PropertyValue>(minimumCapacity: values.count)
        var list: [PredicateNode] = []
        list.reserveCapacity(values.count)
        for value in values where unique.insert(value).inserted { list.append(.constant(value)) }
        var request = FetchRequest<ManagedObject>(entityName: entity.name)
        // One query: a long key list is bound as one JSON array (PredicateSQLList), not a parameter per key.
        request.predicate = FetchPredicate(expression: .comparison(lhs: .keyPath([attribute.name]), op: .in, rhs: .collection(list),
                                                                   options: [], modifier: .direct))
        request.returnsObjectsAsFaults = false
        var objects: [PropertyValue: ManagedObject] = [:]
        objects.reserveCapacity(values.count)
        var typeChecked = false
        // Keys held by rows of a subentity of another class: not this import's objects, but not absent.
        var heldByOthers: [PropertyValue] = []
        for fetched in try context.fetch(request) {
            guard let object = fetched as? Object else {
                heldByOthers.append(fetched.slotValue(at: attribute.index))
                continue
            }
            let stored = object.slotValue(at: attribute.index)
            // Found, so not absent: one hash finds the key and takes it out of what is left
            // (a second row holding it, without a unique index, finds it among the objects).
            let lookedFor = unique.remove(stored) != nil || objects[stored] != nil
            // The key type is checked once, on the first row: every row's value has the attribute's type.
            if !typeChecked || !lookedFor {
                try checkKeyType(of: stored, lookedFor: lookedFor, as: Key.self, attribute: attribute, entity: entity)
                typeChecked = true
            }
            objects[stored] = object
        }
        // What is left of the keys looked for: those no row holds.
        for held in heldByOthers { unique.remove(held) }
        return (objects, unique, list.count < values.count)
    }

    /// The stored objects whose `attribute` holds one of `values`, which are
    /// distinct (``KeyDistinctness``), by the position of the value each
    /// holds, all of class `Object`, loaded; and by position, whether a row of
    /// another class holds the value (not this import's object, but not absent).
    /// One query, as ``stored(_:entity:attribute:values:keyType:in:)`` makes it,
    /// its list said to be distinct (``FetchPredicate/listIsDistinct``).
    ///
    /// Why by position: the query's list drives it (`SelectQuery+KeyList.swift`),
    /// so its rows come in the list's order, and each row is matched to its
    /// key by walking the list with it — an equality test, no hash. Rows in
    /// another order (another plan), or two rows of one key, are matched
    /// through a dictionary of the positions instead.
    ///
    /// - Throws: ``StackError/Code/keyTypeMismatch``, as `stored` throws it.
    private static func stored<Object: ManagedObject, Key>(byPosition type: Object.Type, entity: EntityDescription,
                                                           attribute: AttributeDescription, values: [PropertyValue],
                                                           keyType: Key.Type, in context: ManagedObjectContext) throws
        -> (objects: [ManagedObject?], heldByOthers: [Bool]) {
        var request = FetchRequest<ManagedObject>(entityName: entity.name)
        var predicate = FetchPredicate(expression: .comparison(lhs: .keyPath([attribute.name]), op: .in,
                                                               rhs: .collection(values.map(PredicateNode.constant)),
                                                               options: [], modifier: .direct))
        predicate.listIsDistinct = true
        request.predicate = predicate
        request.returnsObjectsAsFaults = false
        let rows = try context.fetch(request)
        var objects = [ManagedObject?](repeating: nil, count: values.count)
        var heldByOthers = [Bool](repeating: false, count: values.count)
        var typeChecked = false
        // The key type is checked once, on the first row of the class: every row's value has the attribute's type.
        func checkType(_ stored: PropertyValue, lookedFor: Bool) throws {
            try checkKeyType(of: stored, lookedFor: lookedFor, as: Key.self, attribute: attribute, entity: entity)
            typeChecked = true
        }
        var next = 0
        walk: for fetched in rows {
            let stored = fetched.slotValue(at: attribute.index)
            var position = next
            while position < values.count, values[position] != stored { position += 1 }
            guard position < values.count else {
                // Not in the list's order: start again with the positions hashed.
                objects = [ManagedObject?](repeating: nil, count: values.count)
                heldByOthers = [Bool](repeating: false, count: values.count)
                next = -1
                break walk
            }
            next = position + 1
            if let object = fetched as? Object {
                if !typeChecked { try checkType(stored, lookedFor: true) }
                objects[position] = object
            } else {
                heldByOthers[position] = true
            }
        }
        if next < 0 {
            var positions: [PropertyValue: Int] = [:]
            positions.reserveCapacity(values.count)
            for (position, value) in values.enumerated() { positions[value] = position }
            for fetched in rows {
                let stored = fetched.slotValue(at: attribute.index)
                let position = positions[stored]
                guard let object = fetched as? Object else {
                    if let position { heldByOthers[position] = true }
                    continue
                }
                if !typeChecked || position == nil { try checkType(stored, lookedFor: position != nil) }
                // A second row holding a key (without a unique index): the later one, as `stored` keeps it.
                if let position { objects[position] = object }
            }
        }
        return (objects, heldByOthers)
    }

    /// Throws ``StackError/Code/keyTypeMismatch`` unless `stored`, a value a
    /// lookup found, was looked for and reads as a `Key`: a key attribute
    /// whose values are of another type than the import's keys.
    private static func checkKeyType<Key>(of stored: PropertyValue, lookedFor: Bool, as type: Key.Type,
                                          attribute: AttributeDescription, entity: EntityDescription) throws {
        let read = stored.anyValue(for: attribute.type)
        guard lookedFor, key(read, as: Key.self) != nil else {
            let storedType = read.map { "\(Swift.type(of: $0))" } ?? "nil"
            throw StackError(.keyTypeMismatch, message: """
                \(entity.name).\(attribute.name) holds \(storedType) values, not the import's keys of type \(Key.self)
                """)
        }
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

    /// The entity of `type` in the stack's model, and its attribute named `attribute`.
    private func upsertEntity(for type: ManagedObject.Type, attribute: String) throws -> (EntityDescription, AttributeDescription) {
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
        guard let keyAttribute = entity.attributesByName[attribute] else {
            throw StackError(.notInModel, message: "entity \(entity.name) has no attribute \(attribute) to find existing objects by")
        }
        return (entity, keyAttribute)
    }
}
