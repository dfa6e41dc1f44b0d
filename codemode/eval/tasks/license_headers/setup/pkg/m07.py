import os

NAME_7 = 'm7'
