import Foundation

extension ManagedObjectModel {
    /// Derives a model from its classes: each class's `@Managed` properties
    /// and ``ManagedObject/entityDeclaration`` make an entity, bound to the class.
    ///
    /// ```swift
    /// final class Company: ManagedObject {
    ///     @Managed(.unique) var symbol: String
    ///     @Managed var name: String = ""
    ///     @Managed(inverse: \.company, deleteRule: .cascade) var updates: Set<StockUpdate>
    /// }
    /// final class StockUpdate: ManagedObject {
    ///     @Managed var price: Double
    ///     @Managed var company: Company?
    /// }
    /// let model = try ManagedObjectModel(classes: [Company.self, StockUpdate.self])
    /// ```
    ///
    /// - The Swift type gives the attribute type (see "Declaring a model in
    ///   Swift" for the table), `Optional` gives ``PropertyDescription/isOptional``,
    ///   an initial value gives ``AttributeDescription/defaultValue``.
    /// - A class's managed superclass makes its entity's superentity; the
    ///   superclasses and the relationships' destination classes are added to
    ///   the model when they are not listed.
    /// - An inverse declared on one side is enough. When neither side declares
    ///   it, a relationship's inverse is inferred when the destination has
    ///   exactly one relationship back to the class that declares no inverse
    ///   (and the class exactly one to the destination).
    ///
    /// - Throws: ``ModelDeclarationError`` naming the class and property: a
    ///   Swift type with no attribute type, a relationship whose inverse cannot
    ///   be resolved, two classes for one entity name, a constraint, index or
    ///   property user info naming a key path that is no `@Managed` property
    ///   of the class (user info: no property the class itself declares), a
    ///   non-optional to-one.
    public convenience init(classes: [ManagedObject.Type]) throws(ModelDeclarationError) {
        var builder = DeclaredModelBuilder()
        let entities = try builder.makeEntities(for: classes)
        self.init(entities: entities)
        try builder.resolveKeyPaths(in: self)
        do {
            try validate()
        } catch {
            throw ModelDeclarationError(.invalidModel, className: builder.classNames.joined(separator: ", "),
                                        message: error.modelProblems.joined(separator: "; "))
        }
    }
}

/// Builds the entities of ``ManagedObjectModel/init(classes:)``.
struct DeclaredModelBuilder {
    private struct Entry {
        let declarations: ClassDeclarations
        let entity: EntityDescription
    }

    private var entries: [Entry] = []
    private var byClass: [ObjectIdentifier: Int] = [:]
    /// Relationships whose inverse a key path declares, with that key path.
    private var declaredInverses: [(relationship: RelationshipDescription, entry: Int, property: String, keyPath: AnyKeyPath, destination: ManagedObject.Type)] = []

    var classNames: [String] { entries.map(\.declarations.className) }

    /// The entities of `classes`, their managed superclasses and their
    /// relationships' destinations, with names resolved but not key paths.
    mutating func makeEntities(for classes: [ManagedObject.Type]) throws(ModelDeclarationError) -> [EntityDescription] {
        var pending = classes
        var byName: [String: ManagedObject.Type] = [:]
        while !pending.isEmpty {
            let type = pending.removeFirst()
            if byClass[ObjectIdentifier(type)] != nil { continue }
            if type == ManagedObject.self {
                throw ModelDeclarationError(.unsupportedType, className: "ManagedObject",
                                            message: "ManagedObject itself makes no entity; list its subclasses")
            }
            let declarations = try ClassDeclarations.of(type)
            let entityName = ClassDeclarations.entityName(of: type)
            if let other = byName[entityName] {
                throw ModelDeclarationError(.duplicateEntityName, className: declarations.className, entityName: entityName,
                                            message: "\(ClassDeclarations.unqualifiedName(of: other)) makes an entity named \(entityName) too; give one an EntityDeclaration(name:)")
            }
            byName[entityName] = type
            let entity = try makeEntity(declarations, named: entityName)
            byClass[ObjectIdentifier(type)] = entries.count
            entries.append(Entry(declarations: declarations, entity: entity))
            if let parent = declarations.superclass { pending.append(parent) }
            for property in declarations.properties {
                if let destination = Self.destination(of: property.declaration.valueKind) { pending.append(destination) }
            }
        }
        var children: [ObjectIdentifier: [EntityDescription]] = [:]
        for entry in entries {
            if let parent = entry.declarations.superclass { children[ObjectIdentifier(parent), default: []].append(entry.entity) }
        }
        for entry in entries {
            if let subentities = children[ObjectIdentifier(entry.declarations.type)] { entry.entity.subentities = subentities }
        }
        return entries.map(\.entity)
    }

    private static func destination(of kind: _ManagedValueKind) -> ManagedObject.Type? {
        switch kind {
        case .optional(let wrapped): destination(of: wrapped)
        case .toOne(let type), .toMany(let type, _): type
        case .attribute, .unsupported: nil
        }
    }

    private mutating func makeEntity(_ declarations: ClassDeclarations, named name: String) throws(ModelDeclarationError) -> EntityDescription {
        let declared = declarations.entity
        let entity = EntityDescription(name: name, managedObjectClass: declarations.type)
        entity.isAbstract = declared.isAbstract
        entity.renamingIdentifier = declared.originalName
        entity.versionHashModifier = declared.hashModifier
        entity.userInfo = declared.userInfo
        var properties: [PropertyDescription] = []
        var constraints: [[String]] = []
        for property in declarations.properties {
            func failure(_ code: ModelDeclarationError.Code, _ message: String) -> ModelDeclarationError {
                ModelDeclarationError(code, className: declarations.className, propertyName: property.name, entityName: name, message: message)
            }
            let declaration = property.declaration
            var kind = declaration.valueKind
            var isOptional = false
            if case .optional(let wrapped) = kind {
                kind = wrapped
                isOptional = true
            }
            let made: PropertyDescription
            switch kind {
            case .attribute(let type):
                let attribute = AttributeDescription(name: property.name, type: type, isOptional: isOptional,
                                                     defaultValue: declaration.initialValue ?? .null)
                let options = declaration.options
                attribute.isIndexed = options.contains(.indexed)
                attribute.preservesValueInHistoryOnDeletion = options.contains(.preserveValueOnDeletion)
                if options.contains(.externalStorage) {
                    guard type == .binaryData || type == .transformable else {
                        throw failure(.invalidOption, ".externalStorage applies to Data and transformable values, not \(declaration.valueTypeName)")
                    }
                    attribute.allowsExternalBinaryDataStorage = true
                }
                if options.contains(.unique) { constraints.append([property.name]) }
                attribute.minimumValue = declaration.minimumValue
                attribute.maximumValue = declaration.maximumValue
                attribute.minimumLength = declaration.minimumLength
                attribute.maximumLength = declaration.maximumLength
                attribute.regularExpression = declaration.regularExpression
                made = attribute
            case .toOne(let destination), .toMany(let destination, _):
                var isToMany = false
                var isOrdered = false
                if case .toMany(_, let ordered) = kind {
                    isToMany = true
                    isOrdered = ordered
                }
                if !isToMany && !isOptional {
                    throw failure(.toOneNotOptional, "a to-one relationship must be optional: declare it \(declaration.valueTypeName)?")
                }
                let invalid = declaration.options.subtracting([.transient, .spotlight])
                if !invalid.isEmpty {
                    throw failure(.invalidOption, "attribute options (\(invalid.rawValue)) do not apply to a relationship")
                }
                if declaration.initialValue != nil {
                    throw failure(.invalidOption, "a relationship has no default value; remove the initial value")
                }
                // A to-many may be empty unless it requires a minimum count:
                // Core Data's non-optional to-many holds at least one object.
                let relationship = RelationshipDescription(
                    name: property.name, destination: ClassDeclarations.entityName(of: destination),
                    isToMany: isToMany, isOrdered: isOrdered, deleteRule: declaration.deleteRule,
                    isOptional: isToMany ? (isOptional || declaration.minimumCount == 0) : true)
                relationship.minCount = declaration.minimumCount
                relationship.maxCount = declaration.maximumCount
                if let keyPath = declaration.inverse {
                    declaredInverses.append((relationship, entries.count, property.name, keyPath, destination))
                }
                made = relationship
            case .optional, .unsupported:
                throw failure(.unsupportedType, "\(declaration.valueTypeName) is no attribute type and no relationship; conform it to ManagedAttributeValue or TransformableValue")
            }
            made.isTransient = declaration.options.contains(.transient)
            made.isIndexedBySpotlight = declaration.options.contains(.spotlight)
            made.renamingIdentifier = declaration.originalName
            made.versionHashModifier = declaration.hashModifier
            made.userInfo = declaration.userInfo
            properties.append(made)
        }
        entity.properties = properties
        entity.uniquenessConstraints = constraints
        return entity
    }

    // MARK: - Key paths

    /// Resolves the constraints', indexes', property user info's and inverses' key paths, and infers
    /// the inverses no key path declares.
    func resolveKeyPaths(in model: ManagedObjectModel) throws(ModelDeclarationError) {
        for entry in entries {
            let declared = entry.declarations.entity
            let className = entry.declarations.className
            var constraints = entry.entity.uniquenessConstraints
            for (number, constraint) in declared.uniquenessConstraints.enumerated() {
                var names: [String] = []
                for (position, keyPath) in constraint.enumerated() {
                    names.append(try name(of: keyPath, in: entry, purpose: "uniqueness constraint \(number + 1)'s key path \(position + 1)"))
                }
                constraints.append(names)
            }
            entry.entity.uniquenessConstraints = constraints
            var indexes: [FetchIndexDescription] = []
            for (number, index) in declared.indexes.enumerated() {
                var names: [String] = []
                for (position, keyPath) in index.keyPaths.enumerated() {
                    names.append(try name(of: keyPath, in: entry, purpose: "index \(number + 1)'s key path \(position + 1)"))
                }
                if names.isEmpty {
                    throw ModelDeclarationError(.unknownKeyPath, className: className, entityName: entry.entity.name, message: "an index names no key path")
                }
                let indexName = index.name ?? "by" + names.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
                indexes.append(FetchIndexDescription(name: indexName, propertyNames: names))
            }
            entry.entity.indexes = indexes
            var userInfos: [(name: String, userInfo: [String: String])] = []
            for (keyPath, userInfo) in declared.propertyUserInfo {
                let name = try name(of: keyPath, in: entry, purpose: "property user info's key path")
                userInfos.append((name, userInfo))
            }
            for (name, userInfo) in userInfos.sorted(by: { $0.name < $1.name }) {  // of several inherited ones, the first by name is reported
                guard let property = entry.entity.properties.first(where: { $0.name == name }) else {
                    throw ModelDeclarationError(.unknownKeyPath, className: className, propertyName: name, entityName: entry.entity.name,
                                                message: "property user info names \(name), an inherited property: give it in the declaration of the class that declares \(name)")
                }
                for (key, value) in userInfo {
                    if let declared = property.userInfo[key], declared != value {
                        throw ModelDeclarationError(.conflictingUserInfo, className: className, propertyName: name, entityName: entry.entity.name,
                                                    message: "user info \(key) is \"\(declared)\" in @Managed and \"\(value)\" in the entity declaration")
                    }
                    property.userInfo[key] = value
                }
            }
        }
        try resolveInverses(in: model)
    }

    /// The property a key path of an entry's class names.
    ///
    /// An error names the key path by its place (`uniqueness constraint 1's
    /// key path 2`): Swift prints a key path to a computed property, as every
    /// `@Managed` property is, without its name.
    private func name(of keyPath: AnyKeyPath, in entry: Entry, purpose: String) throws(ModelDeclarationError) -> String {
        let type = entry.declarations.type
        let entity = entry.entity
        func failure(_ message: String) -> ModelDeclarationError {
            ModelDeclarationError(.unknownKeyPath, className: entry.declarations.className, entityName: entity.name, message: message)
        }
        let root = Swift.type(of: keyPath).rootType
        guard let rootClass = root as? ManagedObject.Type, ClassDeclarations.isClass(type, kindOf: rootClass) else {
            throw failure("the \(purpose) starts at \(root), not at \(entry.declarations.className) or a superclass")
        }
        let slot = entity.managedSlots.probe.slot(
            for: keyPath,
            on: type.init(entity: entity, insertInto: nil),
            read: { object in _ = object[keyPath: keyPath] }
        )
        guard let slot else { throw failure("the \(purpose) names no @Managed property of \(entry.declarations.className)") }
        return entity.slotProperties[slot].name
    }

    private func resolveInverses(in model: ManagedObjectModel) throws(ModelDeclarationError) {
        let entities = model.entitiesByName
        var explicit = Set<ObjectIdentifier>()
        for declared in declaredInverses {
            let source = entries[declared.entry]
            func failure(_ message: String) -> ModelDeclarationError {
                ModelDeclarationError(.unresolvedInverse, className: source.declarations.className, propertyName: declared.property,
                                      entityName: source.entity.name, message: message)
            }
            guard let index = byClass[ObjectIdentifier(declared.destination)] else { continue }
            let destination = entries[index]
            let name: String
            do {
                name = try self.name(of: declared.keyPath, in: destination, purpose: "inverse key path")
            } catch {
                throw failure("the inverse \(error.message)")
            }
            guard let inverse = destination.entity.propertiesByName[name] as? RelationshipDescription else {
                throw failure("the inverse \(destination.declarations.className).\(name) is an attribute, not a relationship")
            }
            guard let inverseDestination = entities[inverse.destinationEntityName], source.entity.isKind(of: inverseDestination) else {
                throw failure("the inverse \(destination.declarations.className).\(name) leads to \(inverse.destinationEntityName), not to \(source.entity.name)")
            }
            if let existing = declared.relationship.inverseName, existing != name {
                throw failure("the inverse is declared as \(name), and \(existing) declares this relationship as its inverse")
            }
            if explicit.contains(ObjectIdentifier(inverse)), let other = inverse.inverseName, other != declared.relationship.name {
                throw failure("\(destination.declarations.className).\(name) declares \(other) as its inverse, not \(declared.relationship.name)")
            }
            declared.relationship.inverseName = name
            explicit.insert(ObjectIdentifier(declared.relationship))
            if inverse.inverseName == nil { inverse.inverseName = declared.relationship.name }
        }
        // Inference: each side's only relationship to the other without an inverse.
        for entry in entries {
            for case let relationship as RelationshipDescription in entry.entity.properties where relationship.inverseName == nil {
                func failure(_ message: String) -> ModelDeclarationError {
                    ModelDeclarationError(.unresolvedInverse, className: entry.declarations.className, propertyName: relationship.name,
                                          entityName: entry.entity.name, message: message)
                }
                guard let destination = entities[relationship.destinationEntityName] else { continue }
                let candidates = Self.unpaired(in: destination, to: entry.entity.name).filter { $0 !== relationship }
                let back = Self.unpaired(in: entry.entity, to: destination.name)
                guard candidates.count == 1, let inverse = candidates.first, back.count == 1 || (back.count == 2 && destination === entry.entity) else {
                    let names = candidates.map(\.name).sorted().joined(separator: ", ")
                    throw failure(candidates.isEmpty
                        ? "no inverse: \(destination.name) has no relationship back to \(entry.entity.name); declare one and name it with @Managed(inverse:)"
                        : "the inverse is ambiguous (\(names)); name it with @Managed(inverse:)")
                }
                relationship.inverseName = inverse.name
                inverse.inverseName = relationship.name
            }
        }
    }

    /// The relationships of `entity` (its own and inherited) to the entity
    /// named `name` that have no inverse yet.
    private static func unpaired(in entity: EntityDescription, to name: String) -> [RelationshipDescription] {
        entity.slotProperties.compactMap { $0 as? RelationshipDescription }
            .filter { $0.destinationEntityName == name && $0.inverseName == nil }
    }
}
