# A workspace file that shadows a module the language server imports: it must never run (issue 15, item 4).
import os

open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../RAN_newt___init__.py"), "w").close()
raise ImportError("the workspace's newt/__init__.py was imported")
