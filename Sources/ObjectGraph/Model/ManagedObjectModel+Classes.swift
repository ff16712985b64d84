import Foundation

extension ManagedObjectModel {
    /// Binds subclasses to the entities a loaded model names them for.
    ///
    /// An entity takes a class when the class's name equals the entity's
    /// `managedObjectClassName` (with or without a module prefix or leading
    /// dot) or, when the file names no class, the entity's name:
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(contentsOf: modelURL)
    /// model.bindManagedObjectClasses([Company.self, StockUpdate.self])
    /// ```
    ///
    /// Call it before a coordinator uses the model. Entities without a matching
    /// class keep ``ManagedObject``.
    public func bindManagedObjectClasses(_ classes: [ManagedObject.Type]) {
        func unqualified(_ name: String) -> Substring {
            name.split(separator: ".").last ?? Substring(name)
        }
        var byName: [Substring: ManagedObject.Type] = [:]
        for type in classes { byName[Substring(ClassDeclarations.unqualifiedName(of: type))] = type }
        for entity in entities {
            let wanted = entity.managedObjectClassName.map(unqualified) ?? Substring(entity.name)
            if let type = byName[wanted], entity.managedObjectClass != type {
                entity.managedObjectClass = type
            }
        }
    }
}
